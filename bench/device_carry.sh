#!/usr/bin/env bash
# Fills .device/ (git-ignored) with what the device image lacks and bench/device.sh builds with,
# taken from this machine's Debian 12 packages (scripts/setup installs them): the SQLite, PCRE2
# and utf8proc headers with their static libraries, and cpp-httplib for `onecat serve` — its
# split header, its shared library and the shared libraries it needs (OpenSSL 3, zlib, Brotli),
# with a pkg-config file pointing at them (device.sh sets PKG_CONFIG_PATH). The link writes an
# old-style DT_RPATH (--disable-new-dtags): unlike DT_RUNPATH it also finds the library's own
# dependencies (Brotli, OpenSSL), so onecat needs no LD_LIBRARY_PATH that would shadow the
# image's libraries for Python and torch.
# Then carry it: device run with carry [".device", ...].
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=$root/.device
lib=/usr/lib/x86_64-linux-gnu
mkdir -p "$dest/httplib/include" "$dest/httplib/lib"
for h in sqlite3.h sqlite3ext.h pcre2.h utf8proc.h; do cp /usr/include/$h "$dest/"; done
for a in libsqlite3.a libpcre2-8.a libutf8proc.a; do cp $lib/$a "$dest/"; done
cp /usr/include/httplib.h "$dest/httplib/include/"
# httplib.h includes Brotli's headers (the library was built with it); the image has OpenSSL's and zlib's.
cp -r /usr/include/brotli "$dest/httplib/include/"
# The libraries under their sonames (what the loader looks for) and the link names.
for so in libcpp-httplib.so.0.11 libssl.so.3 libcrypto.so.3 libz.so.1 libbrotlicommon.so.1 libbrotlidec.so.1 \
  libbrotlienc.so.1; do
  cp -L $lib/$so "$dest/httplib/lib/$so"
done
ln -sf libcpp-httplib.so.0.11 "$dest/httplib/lib/libcpp-httplib.so"
# The flags must be the ones the library was built with (they change httplib.h's classes).
cflags=$(pkg-config --cflags-only-other cpp-httplib)
cat >"$dest/httplib/cpp-httplib.pc" <<EOF
prefix=\${pcfiledir}
Name: cpp-httplib
Description: cpp-httplib carried from Debian 12 for the device
Version: $(pkg-config --modversion cpp-httplib)
Libs: -L\${prefix}/lib -lcpp-httplib -Wl,--disable-new-dtags -Wl,-rpath,\${prefix}/lib -Wl,-rpath-link,\${prefix}/lib
Cflags: -I\${prefix}/include $cflags
EOF
# py-spy (pinned, from PyPI) for device.sh's py-profile step: where the Python package's host time goes.
tmp=$(mktemp -d)
"$root/.venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps -d "$tmp" py-spy==0.4.3
"$root/.venv/bin/python" -c "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); open(sys.argv[2], 'wb').write(z.read([n for n in z.namelist() if n.endswith('/scripts/py-spy')][0]))" "$tmp"/py_spy-*.whl "$dest/py-spy"
chmod +x "$dest/py-spy"
rm -rf "$tmp"
du -sh "$dest"
