#!/usr/bin/env python3
"""Reference Lamb steps for tests/zero/cpu_lamb_test.cc, written from DeepSpeed's FusedLamb
(deepspeed/ops/lamb/fused_lamb.py, csrc/lamb/fused_lamb_cuda_kernel.cu) in NumPy, element
arithmetic in float32 as the kernel does (norms in float64, step size from float corrections):
u = m / (sqrt(v) + eps) + wd * p, r = clamp(||p|| / ||u||, min_coeff, max_coeff) (1 if a norm
is 0), p -= lr * sqrt(1 - b2^t) / (1 - b1^t) * r * u. Prints the C++ initializers the test uses."""
import numpy as np


f32 = np.float32


def lamb(p, g, m, v, t, lr, b1, b2, eps, wd, max_coeff, min_coeff, scale):
    lr, b1, b2, eps, wd = f32(lr), f32(b1), f32(b2), f32(eps), f32(wd)
    g = g * f32(scale)
    m = b1 * m + (f32(1) - b1) * g
    v = b2 * v + (f32(1) - b2) * g * g
    u = m / (np.sqrt(v) + eps) + wd * p
    pn = f32(np.sqrt(np.sum(p.astype(np.float64) ** 2)))
    un = f32(np.sqrt(np.sum(u.astype(np.float64) ** 2)))
    r = f32(1) if pn == 0 or un == 0 else min(max(pn / un, f32(min_coeff)), f32(max_coeff))
    c1 = f32(1 - float(b1) ** t)
    c2 = f32(1 - float(b2) ** t)
    step = lr * np.sqrt(c2) / c1
    return p - step * r * u, m, v, r


def case(name, p, grads, **kw):
    p = np.array(p, dtype=np.float32)
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    ratios = []
    for t, g in enumerate(grads, start=1):
        p, m, v, r = lamb(p, np.array(g, dtype=np.float32), m, v, t, **kw)
        ratios.append(r)
    fmt = lambda a: ", ".join(f"{x:.9g}" for x in a)
    print(f"// {name}: params {{{fmt(p)}}} exp_avg {{{fmt(m)}}} exp_avg_sq {{{fmt(v)}}} "
          f"ratios {{{fmt(ratios)}}}")


kw = dict(lr=0.01, b1=0.9, b2=0.999, eps=1e-8, wd=0.01, max_coeff=10.0, min_coeff=0.01,
          scale=0.5)
case("A", [0.5, -1.0, 2.0, 0.25, -0.75],
     [[0.2, -0.4, 1.0, 0.0, 0.6], [-0.1, 0.3, 0.8, 0.2, -0.4]], **kw)
case("B", [0.001, -0.002, 0.003], [[4.0, -2.0, 6.0], [3.0, 1.0, -5.0]], **kw)  # clamped at min
case("C", [0.0, 0.0, 0.0], [[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]], **kw)  # ||p|| = 0: ratio 1
