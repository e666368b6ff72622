#pragma once
// SmallVector<T, N>: a vector of trivially copyable values that keeps up to N of them in
// place and moves to the heap beyond that. Task::reads and Task::deps use it: almost
// every task reads one to three buffers and depends on a few tasks, so a lowered graph of
// millions of tasks makes no heap allocation for them (two per task with std::vector:
// at 8,192 devices 8 M allocations and ~64 bytes of heap per task). The same 24 bytes as
// a std::vector; the subset of its interface the code uses, and conversions to and from
// std::vector.

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace tessel {

template <class T, std::uint32_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVector holds trivially copyable values");
  static_assert(N * sizeof(T) >= sizeof(T*), "the in-place buffer doubles as the heap pointer");

 public:
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;

  SmallVector() = default;
  SmallVector(std::initializer_list<T> init) { assign(init.begin(), init.end()); }
  SmallVector(const std::vector<T>& v) { assign(v.data(), v.data() + v.size()); }  // NOLINT: as std::vector converts
  SmallVector(const SmallVector& o) { assign(o.begin(), o.end()); }
  SmallVector(SmallVector&& o) noexcept { steal(o); }
  ~SmallVector() { release(); }

  SmallVector& operator=(const SmallVector& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVector& operator=(SmallVector&& o) noexcept {
    if (this != &o) {
      release();
      steal(o);
    }
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> init) {
    assign(init.begin(), init.end());
    return *this;
  }
  SmallVector& operator=(const std::vector<T>& v) {
    assign(v.data(), v.data() + v.size());
    return *this;
  }
  operator std::vector<T>() const { return std::vector<T>(begin(), end()); }  // NOLINT: implicit by design

  [[nodiscard]] T* data() { return cap_ > N ? u_.heap : u_.local; }
  [[nodiscard]] const T* data() const { return cap_ > N ? u_.heap : u_.local; }
  [[nodiscard]] iterator begin() { return data(); }
  [[nodiscard]] iterator end() { return data() + size_; }
  [[nodiscard]] const_iterator begin() const { return data(); }
  [[nodiscard]] const_iterator end() const { return data() + size_; }
  [[nodiscard]] const_iterator cbegin() const { return begin(); }
  [[nodiscard]] const_iterator cend() const { return end(); }
  [[nodiscard]] size_type size() const { return size_; }
  [[nodiscard]] size_type capacity() const { return cap_; }
  [[nodiscard]] bool empty() const { return size_ == 0; }
  [[nodiscard]] T& operator[](size_type i) {
    assert(i < size_);
    return data()[i];
  }
  [[nodiscard]] const T& operator[](size_type i) const {
    assert(i < size_);
    return data()[i];
  }
  [[nodiscard]] T& front() { return (*this)[0]; }
  [[nodiscard]] const T& front() const { return (*this)[0]; }
  [[nodiscard]] T& back() { return (*this)[size_ - 1]; }
  [[nodiscard]] const T& back() const { return (*this)[size_ - 1]; }

  void reserve(size_type n) {
    if (n > cap_) grow(n);
  }
  void clear() { size_ = 0; }
  void resize(size_type n, const T& value = T()) {
    reserve(n);
    for (size_type i = size_; i < n; ++i) data()[i] = value;
    size_ = static_cast<std::uint32_t>(n);
  }
  void push_back(const T& value) {
    const T copy = value;  // `value` may live in this vector
    if (size_ == cap_) grow(static_cast<size_type>(cap_) * 2);
    data()[size_++] = copy;
  }
  template <class... Args>
  T& emplace_back(Args&&... args) {
    push_back(T(std::forward<Args>(args)...));
    return back();
  }
  void pop_back() {
    assert(size_ > 0);
    --size_;
  }
  iterator erase(const_iterator first, const_iterator last) {
    T* f = data() + (first - data());
    const auto n = last - first;
    std::copy(f + n, end(), f);
    size_ -= static_cast<std::uint32_t>(n);
    return f;
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator insert(const_iterator pos, const T& value) {
    const auto at = pos - data();
    const T copy = value;
    push_back(copy);
    T* p = data() + at;
    std::copy_backward(p, end() - 1, end());
    *p = copy;
    return p;
  }

  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const SmallVector& a, const std::vector<T>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  void assign(const T* first, const T* last) {
    const auto n = static_cast<size_type>(last - first);
    if (n > cap_) {
      // `first` never points into this vector here: copies from itself are filtered above.
      release();
      grow(n);
    }
    if (n) std::memmove(data(), first, n * sizeof(T));
    size_ = static_cast<std::uint32_t>(n);
  }
  void grow(size_type n) {
    n = std::max<size_type>(n, N * 2);
    T* heap = static_cast<T*>(std::malloc(n * sizeof(T)));
    if (!heap) throw std::bad_alloc();
    if (size_) std::memcpy(heap, data(), size_ * sizeof(T));
    if (cap_ > N) std::free(u_.heap);
    u_.heap = heap;
    cap_ = static_cast<std::uint32_t>(n);
  }
  void release() {
    if (cap_ > N) std::free(u_.heap);
    cap_ = N;
    size_ = 0;
  }
  void steal(SmallVector& o) {
    size_ = o.size_;
    cap_ = o.cap_;
    if (o.cap_ > N) {
      u_.heap = o.u_.heap;
    } else {
      std::copy_n(o.u_.local, o.size_, u_.local);  // only the values set: the rest was never written
    }
    o.cap_ = N;
    o.size_ = 0;
  }

  std::uint32_t size_ = 0;
  std::uint32_t cap_ = N;  // > N: the values live in u_.heap
  union U {
    T local[N];
    T* heap;
    U() {}
  } u_;
};

}  // namespace tessel
