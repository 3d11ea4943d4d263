// Impls served by an external worker: the descriptors from its hello become registry
// entries whose contract and run go through a transport — straight to the worker in the
// parent process, relayed through the parent from the process that runs the case.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/registry.hpp"
#include "ext/worker_client.hpp"

namespace kv {

class ExternalTransport {
 public:
  virtual ~ExternalTransport() = default;
  /// One protocol request and its answer; throws ExternalError.
  virtual nlohmann::json request(const nlohmann::json& req) = 0;
  /// A run request (`req` without its file names) served in this process on the case's
  /// tensors as they lie (an impl in the calling process: capi/); false: this transport
  /// takes the tensors through .safetensors files. Throws ExternalError.
  virtual bool run_in_place(const nlohmann::json& req, TensorSet& ts) {
    (void)req, (void)ts;
    return false;
  }
};

/// In the parent: the worker itself.
class DirectTransport : public ExternalTransport {
 public:
  explicit DirectTransport(WorkerClient& w) : w_(w) {}
  nlohmann::json request(const nlohmann::json& req) override { return w_.request(req); }

 private:
  WorkerClient& w_;
};

/// In the case-running process: a `{"external": req}` line on the protocol stream to the
/// parent, whose answer (`{"external_answer": a}` or `{"external_error": why}`) comes
/// back on stdin before the case's verdict is written.
class RelayTransport : public ExternalTransport {
 public:
  explicit RelayTransport(FILE* to_parent) : out_(to_parent) {}
  nlohmann::json request(const nlohmann::json& req) override;

 private:
  FILE* out_;
};

/// The parent's side of the relay: the worker's answer, or its failure, as one line.
nlohmann::json relay_answer(ExternalTransport& t, const nlohmann::json& req);

/// Registers the hello's impls (validated: known ops, devices, knobs, static contracts);
/// throws ExternalError naming the defect.
void register_external(Registry& r, const nlohmann::json& impls, std::shared_ptr<ExternalTransport> t,
                       const std::string& io_dir);

/// The fields of a case every request carries (PROTOCOL.md, "case fields").
nlohmann::json case_fields(const Case& c);

}  // namespace kv
