// The per-element update rules of the optimizers, written once for the CPU kernels in
// core/optimizer.cc and any device kernel (CAVS_HOST_DEVICE: plain float arithmetic, sqrtf).
// Checked on an H100: a kernel built from these with nvcc --fmad=false matches the CPU bit for
// bit; with nvcc's default FMA contraction it differs by rounding only (a few ulp, more in
// relative terms where w - lr * d cancels).
//
// Conventions (see core/optimizer.h for the why):
//   SGD and Adagrad: L2 weight decay, added to the gradient (g += wd * w) before the update.
//   Adam: decoupled weight decay (AdamW, Loshchilov & Hutter): w -= lr * wd * w, then the Adam
//   update computed from the raw gradient.
#pragma once

#include <math.h>

#include "core/host_device.h"

namespace cavs::core {

struct SgdHyper {
  float lr = 0.0f;
  float momentum = 0.0f;  // 0: plain SGD, no state
  float weight_decay = 0.0f;
  bool nesterov = false;
};

struct AdagradHyper {
  float lr = 0.0f;
  float eps = 0.0f;
  float weight_decay = 0.0f;
};

struct AdamHyper {
  float lr = 0.0f;
  float beta1 = 0.0f;
  float beta2 = 0.0f;
  float eps = 0.0f;
  float weight_decay = 0.0f;
  // 1 - beta^t for the step t being taken (t starts at 1).
  float bias_correction1 = 1.0f;
  float bias_correction2 = 1.0f;
};

// SGD (PyTorch's convention): v = mu * v + g; step along v, or g + mu * v with Nesterov.
// `velocity` is unused when momentum == 0.
CAVS_HOST_DEVICE inline void SgdElement(const SgdHyper& h, float& w, float g, float& velocity) {
  g += h.weight_decay * w;
  if (h.momentum != 0.0f) {
    velocity = h.momentum * velocity + g;
    g = h.nesterov ? g + h.momentum * velocity : velocity;
  }
  w -= h.lr * g;
}

// Adagrad: a += g^2; w -= lr * g / (sqrt(a) + eps).
CAVS_HOST_DEVICE inline void AdagradElement(const AdagradHyper& h, float& w, float g,
                                            float& accum) {
  g += h.weight_decay * w;
  accum += g * g;
  w -= h.lr * g / (sqrtf(accum) + h.eps);
}

// Adam with bias correction and decoupled weight decay.
CAVS_HOST_DEVICE inline void AdamElement(const AdamHyper& h, float& w, float g, float& m,
                                         float& v) {
  w -= h.lr * h.weight_decay * w;
  m = h.beta1 * m + (1.0f - h.beta1) * g;
  v = h.beta2 * v + (1.0f - h.beta2) * g * g;
  const float m_hat = m / h.bias_correction1;
  const float v_hat = v / h.bias_correction2;
  w -= h.lr * m_hat / (sqrtf(v_hat) + h.eps);
}

}  // namespace cavs::core
