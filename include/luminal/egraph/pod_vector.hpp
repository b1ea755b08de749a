// A growable array for trivially copyable values, grown with realloc.
//
// The e-graph's arrays and the match buffers grow to tens of megabytes by doubling. With
// std::vector every doubling copies the whole array through the cache; realloc of a large
// block moves pages instead (mremap on Linux), and growth does not zero-fill what the
// caller is about to overwrite.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace luminal::egraph {

/// A vector of trivially copyable `T` (the subset of std::vector the engine uses).
template <class T>
class PodVector {
  static_assert(std::is_trivially_copyable_v<T>, "PodVector holds trivially copyable values only");

 public:
  PodVector() = default;
  PodVector(const PodVector& o) { *this = o; }
  PodVector(PodVector&& o) noexcept { swap(o); }
  PodVector& operator=(const PodVector& o) {
    if (this != &o) {
      clear();
      reserve(o.size_);
      if (o.size_ != 0) std::memcpy(static_cast<void*>(data_), o.data_, o.size_ * sizeof(T));
      size_ = o.size_;
    }
    return *this;
  }
  PodVector& operator=(PodVector&& o) noexcept {
    swap(o);
    return *this;
  }
  ~PodVector() { std::free(data_); }

  void swap(PodVector& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(cap_, o.cap_);
  }

  std::size_t size() const noexcept { return size_; }
  std::size_t capacity() const noexcept { return cap_; }
  bool empty() const noexcept { return size_ == 0; }
  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }
  T& back() noexcept { return data_[size_ - 1]; }
  const T& back() const noexcept { return data_[size_ - 1]; }
  T* begin() noexcept { return data_; }
  T* end() noexcept { return data_ + size_; }
  const T* begin() const noexcept { return data_; }
  const T* end() const noexcept { return data_ + size_; }

  void push_back(const T& v) {
    const T copy = v;  // v may live in this array, which grow() moves
    if (size_ == cap_) grow(size_ + 1);
    data_[size_++] = copy;
  }
  void pop_back() noexcept { --size_; }
  void clear() noexcept { size_ = 0; }
  void reserve(std::size_t n) {
    if (n > cap_) realloc_to(n);
  }
  /// Grows or shrinks to n; new elements are left uninitialized.
  void resize_uninit(std::size_t n) {
    if (n > cap_) grow(n);
    size_ = n;
  }
  /// Grows or shrinks to n; new elements are copies of v.
  void resize(std::size_t n, const T& v = T{}) {
    const T copy = v;
    std::size_t old = size_;
    resize_uninit(n);
    for (std::size_t i = old; i < n; ++i) data_[i] = copy;
  }
  void assign(std::size_t n, const T& v) {
    clear();
    resize(n, v);
  }

 private:
  void grow(std::size_t need) {
    std::size_t cap = cap_ < 16 ? 16 : cap_ * 2;
    while (cap < need) cap *= 2;
    realloc_to(cap);
  }
  void realloc_to(std::size_t cap) {
    void* p = std::realloc(static_cast<void*>(data_), cap * sizeof(T));
    if (p == nullptr) throw std::bad_alloc();
    data_ = static_cast<T*>(p);
    cap_ = cap;
  }

  T* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t cap_ = 0;
};

/// PodVector for trivially copyable types, std::vector otherwise.
template <class T>
using FlatVector = std::conditional_t<std::is_trivially_copyable_v<T>, PodVector<T>, std::vector<T>>;

}  // namespace luminal::egraph
