# Sourced by the GPU-machine scripts (gpu-bench.sh, aot-gpu-bench.sh): the
# Vulkan loader and GL dispatch libraries the lent GPU machine lacks, per the
# device tool's README.
#   fetch_vulkan_loader    here: downloads the packages into .gl (once)
#   install_vulkan_loader  there: unpacks them and points at NVIDIA's ICD

fetch_vulkan_loader() {
  if ! ls .gl/libegl1_*.deb >/dev/null 2>&1; then
    mkdir -p .gl /tmp/amd64/partial
    local o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
    apt-get $o update -qq
    (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
  fi
}

install_vulkan_loader() {
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
  local icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  if [ -f "$icd" ]; then export VK_DRIVER_FILES=$icd; fi
}
