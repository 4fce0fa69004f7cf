#!/usr/bin/env bash
# Regenerates Sources/CSIDriver/Generated/ from Sources/CSIDriver/Proto/csi.proto.
# Run by hand after editing the .proto, never in CI: the generated code is
# committed. Needs protoc (Debian's protobuf-compiler) and the two Swift
# plugins, built from the versions Package.swift names (about 10 minutes
# the first time):
#   PLUGINS=DIR bash scripts/generate-csi.sh
# where DIR holds protoc-gen-swift (apple/swift-protobuf 1.39.0) and
# protoc-gen-grpc-swift-2 (grpc/grpc-swift-protobuf 2.4.1).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${PLUGINS:?set PLUGINS to the directory holding protoc-gen-swift and protoc-gen-grpc-swift-2}"
out=Sources/CSIDriver/Generated
mkdir -p "$out"
protoc --proto_path=Sources/CSIDriver/Proto \
    --plugin=protoc-gen-swift="$PLUGINS/protoc-gen-swift" \
    --plugin=protoc-gen-grpc-swift="$PLUGINS/protoc-gen-grpc-swift-2" \
    --swift_opt=Visibility=Public --swift_out="$out" \
    --grpc-swift_opt=Visibility=Public,Client=true,Server=true --grpc-swift_out="$out" \
    csi.proto
ls -l "$out"
