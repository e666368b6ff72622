#pragma once
// Small strongly typed integer ids. Value types: comparable, hashable, printable.

#include <compare>
#include <cstdint>
#include <functional>
#include <ostream>

namespace tessel {

template <class Tag>
struct Id {
  std::int32_t value = -1;

  constexpr Id() = default;
  constexpr explicit Id(std::int32_t v) : value(v) {}
  [[nodiscard]] constexpr bool valid() const { return value >= 0; }
  [[nodiscard]] constexpr std::size_t index() const { return static_cast<std::size_t>(value); }
  friend constexpr auto operator<=>(Id, Id) = default;
  friend std::ostream& operator<<(std::ostream& os, Id id) { return os << id.value; }
};

using NodeId = Id<struct NodeTag>;
using TaskId = Id<struct TaskTag>;
using DeviceId = Id<struct DeviceTag>;
using BufferId = Id<struct BufferTag>;

}  // namespace tessel

template <class Tag>
struct std::hash<tessel::Id<Tag>> {
  std::size_t operator()(tessel::Id<Tag> id) const noexcept { return std::hash<std::int32_t>{}(id.value); }
};
