// An impl of the calling process (include/kverify/kverify_c.h) as an external impl: its
// contract requests go to the caller's contract function, its runs to the caller's run
// function with the case's tensors as they lie (no files).
#pragma once
#include <nlohmann/json.hpp>

#include "ext/external_impl.hpp"
#include "kverify/kverify_c.h"

namespace kv {

class CallbackTransport : public ExternalTransport {
 public:
  CallbackTransport(kvc_run_fn run, kvc_contract_fn contract, void* user) : run_(run), contract_(contract), user_(user) {}
  nlohmann::json request(const nlohmann::json& req) override;
  bool run_in_place(const nlohmann::json& req, TensorSet& ts) override;

 private:
  kvc_run_fn run_;
  kvc_contract_fn contract_;
  void* user_;
};

}  // namespace kv
