#include "models/checkpoint/checkpoint_files.h"

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"

namespace onecat::models {
namespace fs = std::filesystem;

CheckpointFiles::CheckpointFiles(const std::string& directory) : directory_(directory) {
  const fs::path dir(directory);
  const fs::path single = dir / "model.safetensors";
  const fs::path index = dir / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::is_regular_file(index, ec)) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_file(index));
    } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e400
      throw InputError(index.string() + " is not valid JSON (" + e.what() + ").");
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
      throw InputError(index.string() + " has no \"weight_map\" object naming each tensor's shard.");
    }
    std::map<std::string, SafetensorsFile*> shards;
    for (const auto& [tensor, shard] : j["weight_map"].items()) {
      if (!shard.is_string())
        throw InputError(index.string() + ": the shard of tensor " + tensor + " is not a file name.");
      const std::string file = shard.get<std::string>();
      // A shard is a plain file name beside the index; anything else could read outside the checkpoint.
      if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") {
        throw InputError(index.string() + ": tensor " + tensor + " names shard \"" + file +
                         "\", not a file in the directory.");
      }
      auto it = shards.find(file);
      if (it == shards.end()) {
        const fs::path path = dir / file;
        if (!fs::exists(path, ec)) {
          throw InputError(index.string() + ": shard " + path.string() + " (holding tensor " + tensor +
                           ") is missing; download the whole checkpoint.");
        }
        files_.push_back(std::make_unique<SafetensorsFile>(path.string()));
        it = shards.emplace(file, files_.back().get()).first;
      }
      if (!it->second->find(tensor)) {
        throw InputError(index.string() + ": tensor " + tensor + " should be in " + it->second->path() +
                         " but that shard does not hold it; the checkpoint is incomplete or mixed.");
      }
    }
    if (files_.empty()) throw InputError(index.string() + " lists no tensors.");
  } else if (fs::is_regular_file(single, ec)) {
    files_.push_back(std::make_unique<SafetensorsFile>(single.string()));
  } else {
    throw InputError("directory " + directory +
                     " has neither model.safetensors nor model.safetensors.index.json; pass a "
                     "Hugging Face checkpoint directory with safetensors weights.");
  }
}

const Tensor* CheckpointFiles::find(std::string_view name) const {
  for (const auto& f : files_) {
    if (const Tensor* t = f->find(name)) return t;
  }
  return nullptr;
}

const Tensor& CheckpointFiles::require(std::string_view name) const {
  const Tensor* t = find(name);
  if (!t)
    throw InputError(directory_ + ": tensor " + std::string(name) +
                     " is missing from the checkpoint's safetensors files.");
  return *t;
}

size_t CheckpointFiles::total_bytes() const {
  size_t n = 0;
  for (const auto& f : files_) n += f->file_bytes();
  return n;
}

}  // namespace onecat::models
