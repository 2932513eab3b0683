"""The GPU a pasted llama-bench `-o md` table ran on, from the device lines ggml's backends log above it.

A table has no gpu_info column; a paste that keeps the log lines printed before it (stderr merged into
stdout) names the device, one line per device, in each backend's own form:

    CUDA / HIP (ggml_cuda_init):   "  Device 0: AMD Radeon AI PRO R9700, gfx1201 (0x1201), VMM: no, ..."
    Vulkan (ggml_vk_print_gpu_info):
        "ggml_vulkan: 0 = AMD Radeon RX 580 Series (RADV POLARIS10) (radv) | uma: 0 | fp16: 0 | ..."
        (the device name, then its driver name in parentheses; the oldest releases print no driver:
        "ggml_vulkan: 0 = AMD Radeon RX 7900 XTX (RADV NAVI31) | uma: 0 | ...")
    Metal (ggml_metal_init, ggml_metal_device_init):
        "ggml_metal_init: GPU name:   Apple M1 Pro"   /   "ggml_metal_device_init: GPU name:   MTL0 (Apple M5 Max)"

The name is the one llama-bench writes as that device's gpu_info in its other formats (-o json: the
device description, e.g. "AMD Radeon RX 580 Series (RADV POLARIS10)", "Apple M5 Max").
"""

from __future__ import annotations

import re

_CUDA = re.compile(r"^\s*Device (?P<n>\d{1,3}): (?P<name>[^,]{1,200}),")
_VULKAN = re.compile(r"^\s*ggml_vulkan: (?P<n>\d{1,3}) = (?P<head>[^|]{1,300}?)\s*\| uma:")
_METAL = re.compile(
    r"^\s*ggml_metal_(?:device_)?init: GPU name:[ \t]{1,16}(?:MTL(?P<n>\d{1,3}) \((?P<mtl>[^()]{1,200})\)|(?P<name>.{1,200}))$"
)
"""Matched against the line with its trailing white space cut: `\\s+NAME?\\s*$` took 46 s of CPU on a
10 kB line of spaces (breaker round 21); this form is linear."""
_LAST_GROUP = re.compile(r"^(?P<name>.+?) \((?P<group>[^()]{1,60})\)$")
_DRIVERS = frozenset({"radv", "nvidia", "llvmpipe", "moltenvk", "amdvlk", "turnip", "dozen"})
"""Vulkan driver names (VkPhysicalDeviceDriverProperties::driverName, lower case) that do not say
`driver` (`AMD proprietary driver`, `Intel open-source Mesa driver` do): `radv`, `NVIDIA`, `MoltenVK`.
A device's own group (`RADV NAVI31`) is none of them."""


def device_line(line: str) -> tuple[int, str, bool] | None:
    """(device number, device name, primary) of a backend's device log line, or None for any other
    line. `primary`: a CUDA/HIP `Device N:` line, whose name wins over a Vulkan or Metal line of the
    same number (a build with HIP and Vulkan lists one GPU under both; its rows ran on the HIP one)."""
    if "Device" in line and (m := _CUDA.match(line)):
        return int(m.group("n")), m.group("name").strip(), True
    if line.lstrip().startswith("ggml_vulkan:") and (m := _VULKAN.match(line)):
        return int(m.group("n")), _vulkan_name(m.group("head").strip(), "matrix cores:" in line), False
    if "GPU name:" in line and (m := _METAL.match(line.rstrip())):
        return int(m.group("n") or 0), (m.group("mtl") or m.group("name")).strip(), False
    return None


Listing = dict[tuple[bool, int], str]
"""The devices a run's log lines listed: (primary, device number) -> device name (listed)."""


def listed(devices: Listing, line: str) -> bool:
    """Whether `line` is a device line (device_line), added to `devices`. A device 0 of a kind (CUDA/HIP,
    or Vulkan and Metal) listed already begins the next run's listing (a run that stopped before its table:
    a bad option; then `GGML_VK_VISIBLE_DEVICES=1`): the devices before it are dropped, never named for a
    table they did not run."""
    d = device_line(line)
    if d is None:
        return False
    if d[0] == 0 and (d[2], 0) in devices:
        devices.clear()
    devices[d[2], d[0]] = d[1]
    return True


def gpu_info(devices: Listing) -> str:
    """The gpu_info of `devices` (listed): each device number's name, a CUDA/HIP one where it has one (a
    build with HIP and Vulkan lists one GPU under both; its rows ran on the HIP one), "" for none."""
    names = {n: name for (_, n), name in sorted(devices.items(), key=lambda d: (d[0][1], d[0][0]))}
    return ", ".join(names[n] for n in sorted(names))


def _vulkan_name(head: str, with_driver: bool) -> str:
    """The device name of a Vulkan line's `NAME (DRIVER)` part: its last parenthesised group is the
    driver where the line has one (`with_driver`: the releases that print `matrix cores:` print the
    driver too; else a second trailing group, or a group that reads as a driver: _DRIVERS); the
    oldest form (`AMD Radeon RX 7900 XTX (RADV NAVI31) | uma:`) is all name."""
    m = _LAST_GROUP.match(head)
    if m is None:
        return head
    group = m.group("group").lower()
    if with_driver or _LAST_GROUP.match(m.group("name")) or group in _DRIVERS or "driver" in group:
        return m.group("name").strip()
    return head
