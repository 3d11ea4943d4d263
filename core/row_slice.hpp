// A case cut along its first dimension (OpBinding::slice_dims): the case of a block of its
// dim-0 indices, its tensors views into the whole case's, or of chosen indices gathered
// into buffers of their own. The streamed runner (check/stream.hpp) evaluates these.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/case.hpp"
#include "core/registry.hpp"
#include "core/tensor.hpp"

namespace kv {

/// Bytes a block of rows may take in the passes that go a block at a time (the streamed
/// runner's reference, the host impls' exact inputs): KV_STREAM_BLOCK_BYTES where set (tests
/// force many blocks with a few KiB), else 256 MiB.
double row_block_bytes();

/// Dim-0 indices per block of a pass that holds `per_index` bytes per index and `shared`
/// bytes per block besides, under `budget`: at least 1, at most `extent`.
int64_t rows_per_block(double per_index, double shared, double budget, int64_t extent);

struct CaseSlice {
  Case c;       // shape[0] the slice's length; no layout or alias (the views carry them)
  TensorSet ts;  // in op.tensors(c)'s order
};

/// Dim-0 indices [b, e) of c: each tensor `dims` names cut along its dim (a view of the
/// same storage, strides kept), the others shared. Throws HarnessError where the op's
/// tensors for the slice do not match the cut.
CaseSlice slice_rows(const OpBinding& op, const Case& c, const TensorSet& ts, const std::map<std::string, int>& dims,
                     int64_t b, int64_t e);

/// The dim-0 indices `idx` (ascending) of c, in that order: each tensor `dims` names
/// copied slice by slice into a contiguous buffer of its own, the others shared.
CaseSlice gather_rows(const OpBinding& op, const Case& c, const TensorSet& ts, const std::map<std::string, int>& dims,
                      const std::vector<int64_t>& idx);

}  // namespace kv
