// Where a checkpoint named on a command line is: a directory as given, or a Hugging Face hub id
// ("Qwen/Qwen3-8B", as vLLM takes it) already downloaded into the Hugging Face cache
// (`huggingface-cli download`, `snapshot_download`): $HF_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub; models--ORG--NAME, the
// snapshot refs/main names (or the only one there is). onecat downloads nothing.
#pragma once
#include <string>

namespace onecat::models {

// The directory to load: `model` itself unless it is ORG/NAME and no such directory exists;
// then the cached snapshot, or InputError, one sentence, naming where it looked and how to
// download it.
std::string locate_checkpoint(const std::string& model);

}  // namespace onecat::models
