// A cache key of integers: dims with their lengths, flags, enum values, float bit patterns and
// short names packed eight bytes a word, inline (no heap for up to 40 words), compared and hashed
// as one array. Keys built on every call of a hot path (a backend's plan and primitive caches)
// are made of these, not text: formatting a key cost more than the lookup it served
// (bench/plan_keys).
#pragma once

#include <boost/container/small_vector.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "core/hash.h"

namespace gp {

class IntKey {
 public:
  IntKey& add(int64_t v) {
    v_.push_back(v);
    return *this;
  }
  // A list as its length, then its values: [1,2] then [3] is not [1] then [2,3].
  IntKey& add_list(std::span<int64_t const> v) {
    v_.push_back(static_cast<int64_t>(v.size()));
    v_.insert(v_.end(), v.begin(), v.end());
    return *this;
  }
  // Text as its length, then its bytes eight to a word (exact: no two texts share a key).
  IntKey& add_text(std::string_view s) {
    v_.push_back(static_cast<int64_t>(s.size()));
    for (std::size_t i = 0; i < s.size(); i += 8) {
      uint64_t w = 0;
      std::memcpy(&w, s.data() + i, std::min<std::size_t>(8, s.size() - i));
      v_.push_back(static_cast<int64_t>(w));
    }
    return *this;
  }
  // Another key, as a list of its values.
  IntKey& add_key(IntKey const& k) { return add_list(k.values()); }

  std::span<int64_t const> values() const { return {v_.data(), v_.size()}; }
  // FNV-1a's offset and prime over whole words, each word mixed by splitmix64 first so that small
  // integers differing in one bit spread over a table.
  std::size_t hash(uint64_t seed = 0) const {
    uint64_t h = kFnvOffset ^ seed;
    for (int64_t v : v_) h = (h ^ splitmix64(static_cast<uint64_t>(v))) * 1099511628211ull;
    return static_cast<std::size_t>(h);
  }
  friend bool operator==(IntKey const& a, IntKey const& b) { return a.v_ == b.v_; }

 private:
  boost::container::small_vector<int64_t, 40> v_;
};

struct IntKeyHash {
  std::size_t operator()(IntKey const& k) const noexcept { return k.hash(); }
};

}  // namespace gp
