// Typed reads from nlohmann::json that refuse what nlohmann would convert with undefined behaviour
// (a float too large for an integer field, 1e300 as an int) or silently (3.7 as an int, -1 as an
// unsigned). Header-only; used by the readers of plan, profile and checkpoint JSON.
#pragma once

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

namespace gp {

template <typename T>
struct IsStdVector : std::false_type {};
template <typename T>
struct IsStdVector<std::vector<T>> : std::true_type {};

// True when `j` holds a value of type T exactly representable in T (vectors element by element).
template <typename T>
bool json_fits(nlohmann::json const& j) {
  if constexpr (std::is_same_v<T, bool>) {
    return j.is_boolean();
  } else if constexpr (std::is_integral_v<T>) {
    if (j.is_number_unsigned()) return j.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
    if (!j.is_number_integer()) return false;
    int64_t const v = j.get<int64_t>();
    if constexpr (std::is_unsigned_v<T>)
      return v >= 0;
    else
      return v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
             v <= static_cast<int64_t>(std::numeric_limits<T>::max());
  } else if constexpr (std::is_floating_point_v<T>) {
    return j.is_number();
  } else if constexpr (IsStdVector<T>::value) {
    if (!j.is_array()) return false;
    for (auto const& e : j)
      if (!json_fits<typename T::value_type>(e)) return false;
    return true;
  } else {
    return true;  // strings and objects: nlohmann's own type checks throw, which callers catch
  }
}

// j as T, or std::range_error naming the value when it is not exactly a T.
template <typename T>
T json_get(nlohmann::json const& j) {
  if (!json_fits<T>(j)) throw std::range_error("'" + j.dump().substr(0, 40) + "' is not a valid value here");
  return j.get<T>();
}

// j[key] as T when present, else `fallback`; std::range_error as json_get.
template <typename T>
T json_value(nlohmann::json const& j, char const* key, T fallback) {
  auto it = j.find(key);
  return it == j.end() ? fallback : json_get<T>(*it);
}

}  // namespace gp
