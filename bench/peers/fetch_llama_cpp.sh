#!/usr/bin/env bash
# llama.cpp's source, as the PyPI sdist of llama-cpp-python 0.3.36 ships it, trimmed to what
# llama-bench needs on a CUDA machine, in one archive small enough to carry to a GPU machine that
# has no network (the whole sdist is 77 MB; the trimmed archive is a few MB).
#
#   bench/peers/fetch_llama_cpp.sh OUT.tar.gz
#
# Kept: the build files, ggml with its CPU and CUDA backends, the library (src/, include/,
# common/, vendor/) and tools/llama-bench (tools/CMakeLists.txt is rewritten to add only it).
# Dropped: model vocabularies, docs, tests, benches, examples, the other tools and the other
# ggml backends. bench/peers/build_llama_cpp.sh builds it; bench/peers/llama_cpp_peer.py runs it.
set -euo pipefail
out="${1:?usage: fetch_llama_cpp.sh OUT.tar.gz}"
version=0.3.36
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m pip download --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$work" >&2
tar xzf "$work/llama_cpp_python-$version.tar.gz" -C "$work"
src="$work/llama_cpp_python-$version/vendor/llama.cpp"
[ -f "$src/CMakeLists.txt" ] || { echo "fetch_llama_cpp: no vendor/llama.cpp in the sdist" >&2; exit 1; }
rm -rf "$src"/{models,docs,tests,benches,examples,media,gguf-py,grammars,prompts,requirements,pocs}
for backend in "$src"/ggml/src/ggml-*/; do
  case "$(basename "$backend")" in ggml-cpu|ggml-cuda|ggml-blas) ;; *) rm -rf "$backend" ;; esac
done
find "$src/tools" -mindepth 1 -maxdepth 1 -type d ! -name llama-bench -exec rm -rf {} +
printf 'llama_add_compile_flags()\nadd_subdirectory(llama-bench)\n' > "$src/tools/CMakeLists.txt"
mv "$src" "$work/llama.cpp"
printf 'llama.cpp from llama-cpp-python %s (PyPI sdist), trimmed by bench/peers/fetch_llama_cpp.sh\n' "$version" \
  > "$work/llama.cpp/KC_SOURCE"
tar czf "$out" -C "$work" llama.cpp
echo "$out: $(du -h "$out" | cut -f1)"
