#!/usr/bin/env bash
# Unpacks llama.cpp (vendor/llama.cpp of the pinned llama-cpp-python sdist that
# scripts/fetch-testdata fetches and checks) into the git-ignored .llama/, the tree
# bench/llama_peer.sh builds on the device: without models/, docs/, media/, benches/, the mobile examples, the
# backends other than CPU and CUDA that llama.cpp's CMake leaves alone when they are off, and the
# web UI's sources (tools/ui keeps its CMake files and templates, which llama-server's build needs; the build asks
# for no UI), so it stays small enough to carry (about 38 MB).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/fetch-testdata" >/dev/null
version=$(sed -n 's/^version=//p' "$root/scripts/fetch-testdata")
tarball="${ONECAT_TESTDATA_DIR:-$root/.testdata}/llama_cpp_python-$version.tar.gz"
top="llama_cpp_python-$version/vendor/llama.cpp"
rm -rf "$root/.llama.tmp"
mkdir -p "$root/.llama.tmp"
tar xzf "$tarball" -C "$root/.llama.tmp" --strip-components=3 \
  --exclude="$top/models" --exclude="$top/docs" --exclude="$top/media" --exclude="$top/.git" \
  --exclude="$top/tools/ui/*" --exclude="$top/benches" --exclude="$top/examples/llama.android" \
  --exclude="$top/examples/llama.swiftui" \
  --exclude="$top/ggml/src/ggml-"{vulkan,opencl,sycl,hexagon,et,metal} "$top"
tar xzf "$tarball" -C "$root/.llama.tmp" --strip-components=3 "$top/tools/ui/"{CMakeLists.txt,sources.cmake,ui.h.in,ui.cpp.in}
rm -rf "$root/.llama"
mv "$root/.llama.tmp" "$root/.llama"
du -sh "$root/.llama"
