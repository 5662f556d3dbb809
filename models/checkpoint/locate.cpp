#include "models/checkpoint/locate.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <vector>

#include "base/error.h"

namespace onecat::models {
namespace {

namespace fs = std::filesystem;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

fs::path hub_cache() {
  if (const std::string v = env("HF_HUB_CACHE"); !v.empty()) return v;
  if (const std::string v = env("HF_HOME"); !v.empty()) return fs::path(v) / "hub";
  if (const std::string v = env("XDG_CACHE_HOME"); !v.empty()) return fs::path(v) / "huggingface" / "hub";
  return fs::path(env("HOME")) / ".cache" / "huggingface" / "hub";
}

// The snapshot of a cached repository: refs/main's commit, else the only snapshot there is.
std::string snapshot_of(const fs::path& repo) {
  std::ifstream ref(repo / "refs" / "main");
  std::string commit;
  if (ref && std::getline(ref, commit) && !commit.empty() && fs::is_directory(repo / "snapshots" / commit)) {
    return (repo / "snapshots" / commit).string();
  }
  std::vector<fs::path> snapshots;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(repo / "snapshots", ec)) {
    if (e.is_directory()) snapshots.push_back(e.path());
  }
  if (snapshots.size() == 1) return snapshots[0].string();
  return "";
}

}  // namespace

std::string locate_checkpoint(const std::string& model) {
  std::error_code ec;
  if (fs::is_directory(model, ec)) return model;
  static const std::regex hub_id(R"(^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$)");
  // Anything else goes to the loader as a path, whose checks name what is missing.
  if (!std::regex_match(model, hub_id) || model.find("..") != std::string::npos) return model;
  const fs::path cache = hub_cache();
  const std::string org = model.substr(0, model.find('/')), name = model.substr(model.find('/') + 1);
  const fs::path repo = cache / ("models--" + org + "--" + name);
  if (fs::is_directory(repo, ec)) {
    const std::string snapshot = snapshot_of(repo);
    if (!snapshot.empty()) return snapshot;
    throw InputError("the model " + quoted_input(model) + " is in the Hugging Face cache (" + repo.string() +
                     ") but its snapshot is ambiguous: no refs/main and several snapshots; give the snapshot's "
                     "directory.");
  }
  throw InputError("the model " + quoted_input(model) +
                   " is neither a checkpoint directory nor a Hugging Face hub id in the cache (" + cache.string() +
                   "); onecat downloads nothing: fetch it first (huggingface-cli download " + model +
                   ") or give its directory.");
}

}  // namespace onecat::models
