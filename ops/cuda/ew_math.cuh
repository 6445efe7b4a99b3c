// The arithmetic of each element-wise op (EwOp) on CUDA, shared by the interpreter kernel
// (cuda_elementwise.cu) and the generated kernels (ops/cuda/ew_codegen.cc emits calls to these; the
// header travels to NVRTC as a string). Every add, multiply and fused multiply-add is an
// explicit round-to-nearest intrinsic, so the compiler neither contracts an op's product with
// a later op's add (the generated kernels pass values between ops in registers) nor merges a
// product of one op with the same product in another: both kernels round every op alike and
// give the same bits. Only expf and tanhf are library code, the same in both.
#pragma once

namespace cavs::ops::cuda::ew {

__device__ __forceinline__ float Add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float Sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ float Mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float Sigmoid(float a) {
  return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-a)));
}
__device__ __forceinline__ float Tanh(float a) { return tanhf(a); }
__device__ __forceinline__ float Relu(float a) { return fmaxf(a, 0.0f); }
__device__ __forceinline__ float Scale(float a, float scalar, float offset) {
  return __fmaf_rn(scalar, a, offset);
}
// y = the op's output, dy = the gradient flowing into it.
__device__ __forceinline__ float SigmoidGrad(float y, float dy) {
  return __fmul_rn(__fmul_rn(dy, y), __fsub_rn(1.0f, y));
}
__device__ __forceinline__ float TanhGrad(float y, float dy) {
  return __fmul_rn(dy, __fmaf_rn(-y, y, 1.0f));
}
__device__ __forceinline__ float ReluGrad(float x, float dy) { return x > 0.0f ? dy : 0.0f; }
// `keep`: the Philox draw kept the element; `inv_keep` = 1 / (1 - rate).
__device__ __forceinline__ float Dropout(float a, bool keep, float inv_keep) {
  return keep ? __fmul_rn(a, inv_keep) : 0.0f;
}

}  // namespace cavs::ops::cuda::ew
