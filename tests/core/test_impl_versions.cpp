// Impl versions (core/impl_version.hpp, cmake/impl_versions.cmake): the table the build
// generated lists the files each impl's translation units depend on, and a change to one
// file changes exactly the versions of the impls that list it. The generator's hash mode
// reruns over a temporary copy of the listed files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/impl_version.hpp"
#include "core/registry.hpp"

namespace {

namespace fs = std::filesystem;
using Versions = std::map<std::string, std::string>;

bool lists(const kv::ImplVersionEntry& e, const std::string& file) {
  return std::find_if(e.files.begin(), e.files.end(), [&](const char* f) { return file == f; }) != e.files.end();
}

const kv::ImplVersionEntry& entry(const std::string& key) {
  const kv::ImplVersionEntry* e = kv::find_impl_version(key);
  if (!e) throw std::runtime_error("no impl version entry " + key);
  return *e;
}

/// A copy of every file the table lists, the manifest the generator reads, and its runs.
class Copy {
 public:
  Copy() {
    dir_ = fs::temp_directory_path() / ("kv_impl_versions_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "root");
    std::ofstream m(dir_ / "manifest.txt");
    m << "salt " << kv::impl_version_salt() << "\n";
    for (const kv::ImplVersionEntry& e : kv::impl_version_table())
      for (const char* f : e.files) {
        m << e.key << " " << f << "\n";
        const fs::path to = dir_ / "root" / f;
        if (fs::exists(to)) continue;
        fs::create_directories(to.parent_path());
        fs::copy_file(fs::path(KV_SOURCE_DIR) / f, to);
      }
  }
  ~Copy() { fs::remove_all(dir_); }

  fs::path file(const std::string& rel) const { return dir_ / "root" / rel; }

  /// cmake -DMODE=hash over the manifest (plus `extra` lines), hashing the copy.
  Versions hash(const std::string& extra = "") const {
    fs::path manifest = dir_ / "manifest.txt";
    if (!extra.empty()) {
      manifest = dir_ / "manifest_extra.txt";
      fs::copy_file(dir_ / "manifest.txt", manifest, fs::copy_options::overwrite_existing);
      std::ofstream(manifest, std::ios::app) << extra;
    }
    const fs::path out = dir_ / "versions.txt";
    const std::string cmd = std::string("'") + KV_CMAKE_COMMAND + "' -DMODE=hash '-DMANIFEST=" + manifest.string() +
                            "' '-DROOT=" + (dir_ / "root").string() + "' '-DOUT=" + out.string() + "' -P '" +
                            KV_SOURCE_DIR + "/cmake/impl_versions.cmake'";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
    Versions v;
    std::ifstream in(out);
    std::string key, version;
    while (in >> key >> version) v[key] = version;
    return v;
  }

 private:
  fs::path dir_;
};

/// The keys whose version differs between a and b.
std::set<std::string> changed(const Versions& a, const Versions& b) {
  std::set<std::string> c;
  for (auto& [k, v] : a)
    if (!b.count(k) || b.at(k) != v) c.insert(k);
  return c;
}

std::set<std::string> listing(const std::string& file) {
  std::set<std::string> keys;
  for (const kv::ImplVersionEntry& e : kv::impl_version_table())
    if (lists(e, file)) keys.insert(e.key);
  return keys;
}

TEST(ImplVersions, HostTableListsTheHostLoopsAndWhatTheyInclude) {
  const kv::ImplVersionEntry& host = entry("host");
  EXPECT_TRUE(lists(host, "ops/softmax.cpp"));
  EXPECT_TRUE(lists(host, "ops/host/host_impl.hpp"));
  EXPECT_TRUE(lists(host, "ops/rms_norm_host.cpp"));
  EXPECT_TRUE(lists(host, "core/impl_version.hpp"));  // a header every impl includes
  EXPECT_EQ(std::string(host.version).size(), 16u);
  for (const char* f : host.files) {  // source-tree files only: nothing generated, nothing from the system
    EXPECT_FALSE(fs::path(f).is_absolute()) << f;
    EXPECT_EQ(std::string(f).find("build/"), std::string::npos) << f;
    EXPECT_TRUE(fs::exists(fs::path(KV_SOURCE_DIR) / f)) << f;
  }
  // Every built-in impl reports a version from the table; the host ones the host key's.
  std::set<std::string> versions;
  for (const kv::ImplVersionEntry& e : kv::impl_version_table()) versions.insert(e.version);
  const kv::Registry& reg = kv::registry();
  int host_impls = 0;
  for (auto* op : reg.ops())
    for (auto* im : reg.impls(op->name())) {
      if (im->test_only() || im->version() == "test") continue;
      if (im->device() == "host" && im->name() == "host") {
        EXPECT_EQ(im->version(), host.version) << op->name();
        ++host_impls;
      }
      if (im->device() == "host" || im->device() == "cuda")
        EXPECT_TRUE(versions.count(im->version())) << op->name() << " " << im->name();
    }
  EXPECT_GE(host_impls, 10);
  EXPECT_THROW(kv::impl_version("no_such_impl"), kv::HarnessError);
}

TEST(ImplVersions, CudaTableListsContractAndReferenceHeaders) {
#ifndef KV_HAVE_CUDA
  GTEST_SKIP() << "host build: the table has no CUDA impls (cuda_rms_norm, cuda_cross_entropy)";
#else
  EXPECT_TRUE(lists(entry("cuda_rms_norm"), "kernels/rms_norm/contract.hpp"));
  EXPECT_TRUE(lists(entry("cuda_rms_norm"), "kernels/rms_norm/cuda_kernels.cu"));
  EXPECT_TRUE(lists(entry("cuda_cross_entropy"), "reference/ce_params.hpp"));
  // cuda_flce links cross_entropy's plan: its source joins through the header it includes.
  EXPECT_TRUE(lists(entry("cuda_flce"), "kernels/cross_entropy/cuda_plan.cpp"));
  for (const char* op : {"rms_norm", "glu", "softmax", "layer_norm", "rope", "rope_table", "cross_entropy", "flce"})
    EXPECT_NE(kv::find_impl_version(std::string("cuda_") + op), nullptr) << op;
#endif
}

TEST(ImplVersions, ChangingAFileChangesExactlyTheImplsListingIt) {
  Copy copy;
  const Versions base = copy.hash();
  // The generator's hash mode over the sources reproduces the build's own table (a
  // difference: a source changed since this build; rebuild).
  for (const kv::ImplVersionEntry& e : kv::impl_version_table()) EXPECT_EQ(base.at(e.key), e.version) << e.key;

  std::vector<std::string> probes = {"ops/softmax.cpp", "ops/host/host_impl.hpp"};
#ifdef KV_HAVE_CUDA
  probes.insert(probes.end(), {"kernels/rms_norm/contract.hpp", "reference/ce_params.hpp"});
#endif
  for (const std::string& probe : probes) {
    SCOPED_TRACE(probe);
    const std::set<std::string> expect = listing(probe);
    ASSERT_FALSE(expect.empty());
    const fs::path f = copy.file(probe);
    std::stringstream old;
    old << std::ifstream(f).rdbuf();
    std::ofstream(f, std::ios::app) << "// one more line\n";
    const Versions now = copy.hash();
    std::ofstream(f, std::ios::trunc) << old.str();
    EXPECT_EQ(changed(base, now), expect);
#ifdef KV_HAVE_CUDA
    // Negative control: the impls not built from the file keep their versions.
    if (probe == "ops/softmax.cpp") {
      EXPECT_FALSE(now.count("cuda_softmax") == 0) << "no cuda_softmax";
      EXPECT_EQ(now.at("cuda_softmax"), base.at("cuda_softmax"));
      EXPECT_EQ(now.at("cuda_rms_norm"), base.at("cuda_rms_norm"));
    }
#endif
  }
  EXPECT_EQ(copy.hash(), base);  // restored: the same versions again
}

TEST(ImplVersions, AnImplNotListingTheFileKeepsItsVersion) {
  // Negative control in every build: an impl whose files are the host impl's less
  // ops/softmax.cpp, beside the host impl; a change to ops/softmax.cpp moves only the latter.
  Copy copy;
  std::string control;
  for (const char* f : entry("host").files)
    if (std::string(f) != "ops/softmax.cpp") control += std::string("control ") + f + "\n";
  const Versions base = copy.hash(control);
  std::ofstream(copy.file("ops/softmax.cpp"), std::ios::app) << "// one more line\n";
  const Versions now = copy.hash(control);
  EXPECT_NE(now.at("host"), base.at("host"));
  EXPECT_EQ(now.at("control"), base.at("control"));
  // The compilers and flags are part of every version.
  const Versions other = copy.hash(control + "salt another compiler\n");
  for (auto& [key, version] : now) EXPECT_NE(other.at(key), version) << key;
}

}  // namespace
