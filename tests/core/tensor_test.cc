#include "core/tensor.h"

#include <gtest/gtest.h>

namespace cavs::core {
namespace {

TEST(TensorTest, HostZerosAndFromVector) {
  Tensor t = Tensor::Host({2, 3});
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.rows(), 2);
  EXPECT_EQ(t.cols(), 3);
  for (float v : t.ToVector()) EXPECT_EQ(v, 0.0f);
  Tensor u = Tensor::FromVector({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(u.data<float>()[4], 5.0f);
}

TEST(TensorTest, RowsViewSharesStorage) {
  Tensor t = Tensor::FromVector({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor r = t.Rows(1, 3);
  EXPECT_EQ(r.shape(), Shape({2, 2}));
  EXPECT_EQ(r.ToVector(), (std::vector<float>{3, 4, 5, 6}));
  r.data<float>()[0] = 30;
  EXPECT_EQ(t.data<float>()[2], 30.0f);
  EXPECT_EQ(t.View({6}).shape(), Shape({6}));
}

TEST(TensorTest, CopyToAndFrom) {
  Tensor t = Tensor::FromVector({1, 2, 3}, {3});
  absl::StatusOr<Tensor> c = t.CopyTo(Device::Cpu());
  ASSERT_TRUE(c.ok());
  t.data<float>()[0] = 7;
  EXPECT_EQ(c->ToVector(), (std::vector<float>{1, 2, 3}));
  Tensor wrong = Tensor::Host({4});
  EXPECT_FALSE(wrong.CopyFrom(t).ok());
}

TEST(TensorTest, NegativeDimensionIsAnError) {
  absl::StatusOr<Tensor> t = Tensor::Empty(Shape({2, -1}));
  EXPECT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("negative"), std::string::npos);
}

TEST(TensorTest, CudaWithoutBackendIsAnError) {
  if (DeviceAvailable(DeviceType::kCuda)) GTEST_SKIP() << "a CUDA backend is present";
  absl::StatusOr<Tensor> t = Tensor::Empty(Shape({2}), DType::kFloat32, Device::Cuda(0));
  EXPECT_FALSE(t.ok());
}

TEST(DeviceTest, Parse) {
  EXPECT_EQ(*ParseDevice("cpu"), Device::Cpu());
  EXPECT_EQ(*ParseDevice("cuda:1"), Device::Cuda(1));
  EXPECT_FALSE(ParseDevice("tpu").ok());
  EXPECT_FALSE(ParseDevice("cuda:x").ok());
}

}  // namespace
}  // namespace cavs::core
