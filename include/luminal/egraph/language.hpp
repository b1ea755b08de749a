// The contract between the e-graph engine and a language: what an e-node is made of.
//
// An e-node is an operator tag (`L::Op`, an enum), an optional payload (`L::Payload`: a
// constant, a symbol id, or a small struct of attributes) and a list of child e-class ids.
// The engine stores nodes in flat arrays (no allocation per node), so a language only
// describes its types; it never owns nodes itself.
#pragma once

#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

namespace luminal::egraph {

/// An e-class id (and, inside the engine, an e-node id). 32 bits keep the arrays small.
using Id = std::uint32_t;

/// The "no id" marker (absent lookups, empty slots).
inline constexpr Id kNoId = 0xFFFFFFFFu;

/// Payload of a language whose nodes carry nothing but an op and children.
struct NoPayload {
  friend constexpr bool operator==(NoPayload, NoPayload) noexcept { return true; }
};

/// A language for the engine. Requirements:
///  - `L::Op`: an enum (scoped or not) whose values are below `L::kNumOps` (used to index
///    per-op tables: e-matching starts from the classes that hold a given op);
///  - `L::Payload`: a copyable, equality-comparable value stored with every node
///    (`NoPayload` when there is none; `std::int64_t`; or a struct of attributes);
///  - `L::hash_payload(const Payload&)`: a 64-bit hash of a payload, consistent with ==.
/// Example:
/// \code
///   struct Math {
///     enum class Op : std::uint8_t { Num, Sym, Add, Mul };
///     using Payload = std::int64_t;
///     static constexpr std::size_t kNumOps = 4;
///     static std::uint64_t hash_payload(Payload p) { return std::uint64_t(p); }
///   };
/// \endcode
template <class L>
concept Language = requires(const typename L::Payload& p) {
  typename L::Op;
  typename L::Payload;
  requires std::is_enum_v<typename L::Op>;
  requires std::copyable<typename L::Payload>;
  requires std::equality_comparable<typename L::Payload>;
  { L::kNumOps } -> std::convertible_to<std::size_t>;
  { L::hash_payload(p) } -> std::convertible_to<std::uint64_t>;
};

/// The dense index of an op (its enum value), used for per-op tables.
template <Language L>
constexpr std::size_t op_index(typename L::Op op) noexcept {
  return static_cast<std::size_t>(static_cast<std::underlying_type_t<typename L::Op>>(op));
}

/// A read-only view of one e-node stored in an e-graph (or in an extracted term):
/// op, payload and child class ids. Valid until the e-graph next adds a node.
template <Language L>
struct NodeView {
  typename L::Op op;
  const typename L::Payload& payload;
  std::span<const Id> kids;
};

/// FxHash step (the hash egg and rustc use): cheap and good enough for node keys,
/// whose words are small integers. The table takes the high bits, which mix best.
constexpr std::uint64_t hash_step(std::uint64_t h, std::uint64_t word) noexcept {
  return (std::rotl(h, 5) ^ word) * 0x517cc1b727220a95ull;
}

/// Hash of a node key (op, payload, children), folded to the 32 bits the hashcons keeps.
template <Language L>
inline std::uint32_t hash_node(typename L::Op op, const typename L::Payload& payload,
                               std::span<const Id> kids) noexcept {
  std::uint64_t h = hash_step(0, op_index<L>(op) + 1);
  h = hash_step(h, static_cast<std::uint64_t>(L::hash_payload(payload)));
  for (Id k : kids) h = hash_step(h, k);
  // Final avalanche so that the 32 bits kept depend on every word.
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return static_cast<std::uint32_t>(h);
}

}  // namespace luminal::egraph
