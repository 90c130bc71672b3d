// Human-readable numbers for messages and tables.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gp {

std::string format_bytes(int64_t bytes);                    // "1.50 GiB", "512.0 MiB", "100 B"
std::string format_seconds(double s);                       // "1.234 s", "12.3 ms", "45.0 us"
std::string dims_string(std::vector<int64_t> const& dims);  // "[2,3]"

}  // namespace gp
