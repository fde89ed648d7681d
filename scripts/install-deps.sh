#!/usr/bin/env bash
# Installs the Debian 12 packages tvk builds and tests with, and nothing when
# they are all present. Runs as root (or through sudo when it is available).
set -euo pipefail

packages=(
  build-essential cmake pkg-config clang
  clang-format                              # scripts/check-format.sh
  libvulkan-dev libvulkan-volk-dev         # Vulkan headers + loader, volk (compiled into libtvk)
  libshaderc-dev glslc glslang-dev spirv-tools  # GLSL -> SPIR-V
  libcmocka-dev                             # tests
  libtcc-dev                                # the CPU backend's fast tier (optional: TVK_TCC)
  tcc                                       # the same tier in libtvk.so (the tcc executable)
  graphviz                                  # test_schedule renders TVK_GRAPH's output with dot
  mesa-vulkan-drivers vulkan-validationlayers vulkan-tools  # lavapipe + validation for tests
  libopenblas0-pthread                      # samples/bench's matmul reference (dlopen'ed; nothing links it)
  zlib1g-dev dataset-fashion-mnist          # samples/fashion_mnist: reads the gzipped IDX files
  libprotobuf-c-dev protobuf-c-compiler libonnx-dev  # the ONNX importer (libtvk_onnx, TVK_ONNX)
  libonnx-testdata                          # its reference: the ONNX backend test suite
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
