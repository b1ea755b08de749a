// The hashcons: an open-addressing table from node key to node id.
//
// Keys live in the e-graph's flat node arrays, not in the table: a slot holds only the
// node's 32-bit hash and its id (8 bytes), and the caller supplies the key comparison.
// Linear probing with backward-shift deletion (no tombstones), so lookups stay short
// after the many erase/re-insert pairs that rebuilding does.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "luminal/egraph/language.hpp"

namespace luminal::egraph {

/// Open-addressing set of node ids keyed by (hash, caller-compared content).
class Hashcons {
 public:
  /// Number of ids stored.
  std::size_t size() const noexcept { return size_; }
  /// Bytes the table itself uses.
  std::size_t memory_bytes() const noexcept { return slots_.capacity() * sizeof(Slot); }

  /// The id whose hash is `h` and for which `same(id)` holds, or kNoId.
  template <class Same>
  Id find(std::uint32_t h, Same&& same) const {
    if (slots_.empty()) return kNoId;
    for (std::size_t i = home(h);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id == kNoId) return kNoId;
      if (s.hash == h && same(s.id)) return s.id;
    }
  }

  /// Hints the cache with the first slot a probe for hash `h` reads.
  void prefetch(std::uint32_t h) const noexcept {
    if (!slots_.empty()) __builtin_prefetch(&slots_[home(h)]);
  }

  /// Inserts `id` unless an equal key is present; returns the id now stored for the key
  /// (`id` itself when it was inserted).
  template <class Same>
  Id find_or_insert(std::uint32_t h, Id id, Same&& same) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    for (std::size_t i = home(h);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.id == kNoId) {
        s = Slot{h, id};
        ++size_;
        return id;
      }
      if (s.hash == h && same(s.id)) return s.id;
    }
  }

  /// Inserts `id`, known to be absent.
  void insert_new(std::uint32_t h, Id id) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    place(Slot{h, id});
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
      // Entry j may move to `hole` iff `hole` lies cyclically in [want, j).
      bool movable = ((j - want) & mask_) >= ((j - hole) & mask_);
      if (movable) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole] = Slot{0, kNoId};
    --size_;
    return true;
  }

  /// Reserves room for `n` ids without rehashing.
  void reserve(std::size_t n) {
    while (n * 2 > slots_.size()) grow();
  }

  /// Removes everything.
  void clear() {
    slots_.assign(slots_.size(), Slot{0, kNoId});
    size_ = 0;
  }

 private:
  struct Slot {
    std::uint32_t hash;
    Id id;
  };

  std::size_t home(std::uint32_t h) const noexcept {
    // Fibonacci hashing spreads the 32 bits over the table's top bits.
    return static_cast<std::size_t>((static_cast<std::uint64_t>(h) * 0x9E3779B97F4A7C15ull) >> shift_) & mask_;
  }

  void place(Slot s) {
    std::size_t i = home(s.hash);
    while (slots_[i].id != kNoId) i = (i + 1) & mask_;
    slots_[i] = s;
  }

  void grow() {
    std::size_t cap = slots_.empty() ? 64 : slots_.size() * 2;
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(cap, Slot{0, kNoId});
    mask_ = cap - 1;
    shift_ = 64 - static_cast<unsigned>(std::countr_zero(cap));
    for (const Slot& s : old)
      if (s.id != kNoId) place(s);
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  unsigned shift_ = 64;
  std::size_t size_ = 0;
};

}  // namespace luminal::egraph
