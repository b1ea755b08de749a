// The hashcons: an open-addressing table from node key to node id.
//
// Each slot holds the node's 32-bit hash, its id and a `Key`: a copy of the part of the
// node that decides equality for small nodes (op, payload, first children). A probe then
// compares inside the table and touches the node arrays only for nodes with more
// children than the key holds; on the workloads this removes one dependent cache miss per
// lookup, and lookups are most of the cost of applying rules.
// Linear probing with backward-shift deletion (no tombstones), so lookups stay short
// after the many erase/re-insert pairs that rebuilding does.
#pragma once

#include <bit>
#include <cstdint>
#include <utility>
#include <vector>

#include "luminal/egraph/language.hpp"
#include "luminal/egraph/pod_vector.hpp"

namespace luminal::egraph {

/// Open-addressing set of node ids keyed by (hash, key compared by the caller).
template <class Key>
class Hashcons {
 public:
  /// A table entry.
  struct Slot {
    std::uint32_t hash;
    Id id;
    Key key;
  };

  /// Number of ids stored.
  std::size_t size() const noexcept { return size_; }
  /// Bytes the table itself uses.
  std::size_t memory_bytes() const noexcept { return slots_.capacity() * sizeof(Slot); }

  /// The id whose hash is `h` and for whose slot `same(slot)` holds, or kNoId.
  template <class Same>
  Id find(std::uint32_t h, Same&& same) const {
    if (slots_.empty()) return kNoId;
    for (std::size_t i = home(h);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id == kNoId) return kNoId;
      if (s.hash == h && same(s)) return s.id;
    }
  }

  /// Hints the cache with the first slot a probe for hash `h` reads.
  void prefetch(std::uint32_t h) const noexcept {
    if (!slots_.empty()) __builtin_prefetch(&slots_[home(h)]);
  }

  /// Inserts (h, id, key) unless an equal key is present; returns the id now stored for
  /// the key (`id` itself when it was inserted).
  template <class Same>
  Id find_or_insert(std::uint32_t h, Id id, const Key& key, Same&& same) {
    if (needs_growth()) grow();
    for (std::size_t i = home(h);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.id == kNoId) {
        s = Slot{h, id, key};
        ++size_;
        return id;
      }
      if (s.hash == h && same(s)) return s.id;
    }
  }

  /// Inserts an entry known to be absent.
  void insert_new(std::uint32_t h, Id id, const Key& key) {
    if (needs_growth()) grow();
    place(Slot{h, id, key});
    ++size_;
  }

  /// Removes `id`, stored under hash `h`. Returns false when it is not there.
  bool erase(std::uint32_t h, Id id) {
    if (slots_.empty()) return false;
    std::size_t i = home(h);
    for (;; i = (i + 1) & mask_) {
      if (slots_[i].id == kNoId) return false;
      if (slots_[i].id == id) break;
    }
    // Backward shift: pull later entries of the probe run into the hole when their home
    // position allows it, so no tombstone is needed.
    std::size_t hole = i;
    for (std::size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
      if (slots_[j].id == kNoId) break;
      std::size_t want = home(slots_[j].hash);
      // Entry j may move to `hole` iff `hole` lies cyclically in [want, j].
      bool movable = ((j - want) & mask_) >= ((j - hole) & mask_);
      if (movable) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole].id = kNoId;
    --size_;
    return true;
  }

  /// Reserves room for `n` ids without rehashing.
  void reserve(std::size_t n) {
    while (n * 4 > slots_.size() * 3) grow();
  }

 private:
  bool needs_growth() const noexcept { return (size_ + 1) * 4 > slots_.size() * 3; }  // load <= 3/4

  std::size_t home(std::uint32_t h) const noexcept {
    // Fibonacci hashing spreads the 32 bits over the table's top bits.
    return static_cast<std::size_t>((static_cast<std::uint64_t>(h) * 0x9E3779B97F4A7C15ull) >> shift_) &
           mask_;
  }

  void place(const Slot& s) {
    std::size_t i = home(s.hash);
    while (slots_[i].id != kNoId) i = (i + 1) & mask_;
    slots_[i] = s;
  }

  void grow() {
    std::size_t cap = slots_.empty() ? 64 : slots_.size() * 2;
    FlatVector<Slot> old = std::move(slots_);
    slots_.assign(cap, Slot{0, kNoId, Key{}});
    mask_ = cap - 1;
    shift_ = 64 - static_cast<unsigned>(std::countr_zero(cap));
    for (const Slot& s : old)
      if (s.id != kNoId) place(s);
  }

  FlatVector<Slot> slots_;
  std::size_t mask_ = 0;
  unsigned shift_ = 63;
  std::size_t size_ = 0;
};

}  // namespace luminal::egraph
