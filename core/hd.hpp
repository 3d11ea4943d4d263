// KV_HD: functions compiled for the host and, under nvcc, for the GPU too, from one source,
// so that both give the same bits (device code that includes them is built with --fmad=false:
// core/draw.hpp's generator and core/dtype.hpp's rounding use IEEE + - * / and exact scalings only).
#pragma once
#if defined(__CUDACC__)
#define KV_HD __host__ __device__
#else
#define KV_HD
#endif
