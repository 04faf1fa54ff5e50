// Strided views: the ATen view ops must give PyTorch's sizes and strides, or refuse.
#include <gtest/gtest.h>

#include "layout.h"

namespace fusetune {
namespace {

Node view_node(const std::string& op, json args) { return Node{"v", op, std::move(args), json::object(), ""}; }

TEST(Layout, ReshapeOfContiguous) {
  const Layout base = Layout::contiguous("x", {4, 6});
  auto r = apply_view(view_node("aten.view.default", json::array({{{"value", "x"}}, {2, 12}})), base, {2, 12});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->strides, (std::vector<int64_t>{12, 1}));
  EXPECT_TRUE(r->is_contiguous());
}

TEST(Layout, PermuteThenReshapeIsRefused) {
  const Layout base = Layout::contiguous("x", {4, 6});
  auto t = apply_view(view_node("aten.permute.default", json::array({{{"value", "x"}}, {1, 0}})), base, {6, 4});
  ASSERT_TRUE(t);
  EXPECT_EQ(t->strides, (std::vector<int64_t>{1, 6}));
  EXPECT_FALSE(t->is_contiguous());
  EXPECT_FALSE(apply_view(view_node("aten.view.default", json::array({{{"value", "x"}}, {24}})), *t, {24}));
}

TEST(Layout, TransposeExpandUnsqueezeSlice) {
  const Layout base = Layout::contiguous("x", {2, 3, 5});
  auto tr = apply_view(view_node("aten.transpose.int", json::array({{{"value", "x"}}, 0, -1})), base, {5, 3, 2});
  ASSERT_TRUE(tr);
  EXPECT_EQ(tr->strides, (std::vector<int64_t>{1, 5, 15}));
  auto un = apply_view(view_node("aten.unsqueeze.default", json::array({{{"value", "x"}}, 1})), base, {2, 1, 3, 5});
  ASSERT_TRUE(un);
  EXPECT_EQ(un->strides, (std::vector<int64_t>{15, 0, 5, 1}));
  auto ex = apply_view(view_node("aten.expand.default", json::array({{{"value", "x"}}, {4, 2, 3, 5}})), base, {4, 2, 3, 5});
  ASSERT_TRUE(ex);
  EXPECT_EQ(ex->strides, (std::vector<int64_t>{0, 15, 5, 1}));
  auto sl = apply_view(view_node("aten.slice.Tensor", json::array({{{"value", "x"}}, 2, 1, 5, 2})), base, {2, 3, 2});
  ASSERT_TRUE(sl);
  EXPECT_EQ(sl->offset, 1);
  EXPECT_EQ(sl->strides, (std::vector<int64_t>{15, 5, 2}));
  auto se = apply_view(view_node("aten.select.int", json::array({{{"value", "x"}}, 1, -1})), base, {2, 5});
  ASSERT_TRUE(se);
  EXPECT_EQ(se->offset, 10);
  EXPECT_EQ(se->strides, (std::vector<int64_t>{15, 1}));
}

// unfold(d, size, step): windows along d as a new last dimension (ViT's patches), as torch's
// x.unfold gives: sizes [2, 3, 5, 3] and strides [40, 10, 1, 5] for x [2, 8, 5].unfold(1, 3, 2).
TEST(Layout, UnfoldIsAView) {
  const Layout base = Layout::contiguous("x", {2, 8, 5});
  auto u = apply_view(view_node("aten.unfold.default", json::array({{{"value", "x"}}, 1, 3, 2})), base, {2, 3, 5, 3});
  ASSERT_TRUE(u);
  EXPECT_EQ(u->strides, (std::vector<int64_t>{40, 10, 1, 5}));
  EXPECT_FALSE(apply_view(view_node("aten.unfold.default", json::array({{{"value", "x"}}, 1, 9, 1})), base, {2, 0, 5, 9}));
}

// as_strided over a row-major input: its strides and offset count the input's elements; windows
// that overlap are fine, negative strides and elements past the input's end are not.
TEST(Layout, AsStridedCountsTheInputsElements) {
  auto as_strided = [](const Layout& in, json size, json stride, json offset, std::vector<int64_t> out) {
    json args = json::array({{{"value", "x"}}, size, stride});
    if (!offset.is_null()) args.push_back(offset);
    return apply_view(view_node("aten.as_strided.default", args), in, out);
  };
  const Layout slice{"x", {4, 6}, {6, 1}, 12};  // rows 2-5 of a [6, 6] tensor: row-major from element 12
  auto w = as_strided(slice, {3, 4}, {6, 2}, 1, {3, 4});
  ASSERT_TRUE(w);
  EXPECT_EQ(*w, (Layout{"x", {3, 4}, {6, 2}, 13}));
  EXPECT_TRUE(as_strided(slice, {5, 5}, {4, 1}, nullptr, {5, 5}));  // overlapping windows, up to element 20 of 24
  EXPECT_FALSE(as_strided(slice, {5, 5}, {4, 1}, 4, {5, 5}));       // element 24: past the end
  EXPECT_FALSE(as_strided(slice, {2}, {-1}, 3, {2}));
  EXPECT_FALSE(as_strided(Layout{"x", {4, 6}, {1, 4}, 0}, {2}, {1}, nullptr, {2}));  // a transposed input
}

TEST(Layout, BroadcastTo) {
  const Layout bias = Layout::contiguous("b", {7});
  auto r = broadcast_to(bias, {3, 7});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->strides, (std::vector<int64_t>{0, 1}));
  EXPECT_FALSE(r->is_contiguous());
  auto col = broadcast_to(Layout::contiguous("c", {3, 1}), {3, 7});
  ASSERT_TRUE(col);
  EXPECT_EQ(col->strides, (std::vector<int64_t>{1, 0}));
  EXPECT_FALSE(broadcast_to(Layout::contiguous("d", {4}), {3, 7}));
  EXPECT_TRUE(broadcast_to(Layout::contiguous("e", {3, 7}), {3, 7})->is_contiguous());
}

TEST(Layout, OffsetExpressionsFoldSizesAndStrides) {
  // A per-channel bias over [32, 64, 256, 256]: the broadcast dimensions merge and cost nothing.
  EXPECT_EQ(offset_expr(Layout{"b", {32, 64, 256, 256}, {0, 1, 0, 0}, 0}, "idx"), "((long long)(((unsigned)idx / 65536u) % 64u))");
  // A transposed read: no modulo on the outermost dimension.
  EXPECT_EQ(offset_expr(Layout{"t", {3, 4}, {1, 3}, 0}, "idx"), "((long long)((unsigned)idx / 4u) + (long long)((unsigned)idx % 4u) * 3)");
  // Contiguous runs merge into one dimension; size-1 dimensions vanish; a scalar is offset 0.
  EXPECT_EQ(offset_expr(Layout{"c", {5, 1, 6, 7}, {84, 42, 7, 1}, 0}, "idx"), "((long long)((unsigned)idx / 42u) * 84 + (long long)((unsigned)idx % 42u))");
  EXPECT_EQ(offset_expr(Layout{"s", {9, 9}, {0, 0}, 0}, "idx"), "0LL");
  // Over 2^32 elements the arithmetic is 64-bit.
  EXPECT_EQ(offset_expr(Layout{"w", {65536, 65537}, {0, 1}, 0}, "idx"), "((long long)((unsigned long long)idx % 65537ull))");
}

}  // namespace
}  // namespace fusetune
