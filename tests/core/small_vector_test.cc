#include "core/small_vector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/ids.h"

namespace tessel {
namespace {

using Vec = SmallVector<TaskId, 4>;

TEST(SmallVector, KeepsFourInPlaceThenMovesToTheHeap) {
  static_assert(sizeof(Vec) == sizeof(std::vector<TaskId>));
  Vec v;
  EXPECT_TRUE(v.empty());
  const TaskId* local = v.data();
  for (int i = 0; i < 4; ++i) v.emplace_back(i);
  EXPECT_EQ(v.data(), local);
  EXPECT_EQ(v.capacity(), 4u);
  for (int i = 4; i < 100; ++i) v.push_back(TaskId(i));
  EXPECT_NE(v.data(), local);
  ASSERT_EQ(v.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(v[static_cast<std::size_t>(i)], TaskId(i));
  EXPECT_EQ(v.back(), TaskId(99));
}

TEST(SmallVector, CopiesMovesAndConvertsLikeAVector) {
  Vec a = {TaskId(3), TaskId(1), TaskId(3), TaskId(2), TaskId(1), TaskId(7)};
  Vec b = a;
  EXPECT_EQ(a, b);
  Vec c = std::move(b);
  EXPECT_EQ(c, a);
  EXPECT_TRUE(b.empty());  // NOLINT: moved-from is empty, as the sort below relies on nothing else
  std::sort(c.begin(), c.end());
  c.erase(std::unique(c.begin(), c.end()), c.end());
  EXPECT_EQ(c, (std::vector<TaskId>{TaskId(1), TaskId(2), TaskId(3), TaskId(7)}));
  std::vector<TaskId> as_vector = c;
  EXPECT_EQ(as_vector.size(), 4u);
  Vec d;
  d = as_vector;
  EXPECT_EQ(d, c);
  d.push_back(d[0]);  // an element of itself, across the move to the heap
  EXPECT_EQ(d.back(), TaskId(1));
  d.insert(d.begin(), TaskId(9));
  EXPECT_EQ(d.front(), TaskId(9));
  EXPECT_EQ(d.size(), 6u);
  d = {TaskId(5)};
  EXPECT_EQ(d, (std::vector<TaskId>{TaskId(5)}));
  d.clear();
  EXPECT_TRUE(d.empty());
  Vec small = {TaskId(1)};
  Vec big = a;
  small = big;  // in place -> heap
  EXPECT_EQ(small, a);
  big = Vec{TaskId(4)};  // heap -> in place via move
  EXPECT_EQ(big, (std::vector<TaskId>{TaskId(4)}));
}

}  // namespace
}  // namespace tessel
