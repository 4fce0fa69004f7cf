import Foundation
import StorageKit

// SeedSamples: the Swift samples of the Firebase Storage documents in
// shared/seeds/, compiled as written against StorageKit and run as a
// Firebase developer would run them on Linux:
//
//     FIREBASE_CONFIG='{"storageBucket":"BUCKET"}' [STORAGE_EMULATOR_HOST=127.0.0.1:PORT] \
//         .build/debug/SeedSamples [SAMPLE...]
//
// Every sample takes its Storage from `Storage.storage()`, so the
// environment alone decides the bucket, the endpoint and the credentials.
// With no argument all samples run; `list` prints their names. Each sample
// reports what it saw as JSON lines on stdout (see Harness.swift); the test
// (Tests/StorageKitTests/SeedSampleTests.swift) checks those and the bucket.
//
// The main thread runs the samples and blocks while their completion
// handlers run elsewhere: with the default `callbackQueue` that works
// without any run loop. Exit status: 0 when every sample ran to its end,
// 2 for an unknown sample, 3 when a completion did not arrive.

let samples: [(name: String, run: () -> Void)] = [
    ("000-1", sample000_1), ("000-2", sample000_2), ("000-3", sample000_3),
    ("000-4", sample000_4), ("000-5", sample000_5), ("000-6", sample000_6),
    ("001-1", sample001_1), ("001-2", sample001_2), ("001-3", sample001_3),
    ("001-4", sample001_4), ("001-5", sample001_5), ("001-6", sample001_6),
    ("001-7", sample001_7), ("001-8", { sample001_8(cancel: false) }),
    ("001-8-cancel", { sample001_8(cancel: true) }),
    ("002-1", sample002_1), ("002-2", sample002_2), ("002-3", sample002_3), ("002-4", sample002_4),
    ("003-setup", { listSetup("003-setup", count: 5) }),
    ("003-setup-250", { listSetup("003-setup-250", count: 250) }),
    ("003-1", sample003_1), ("003-2", sample003_2),
    ("004-1", sample004_1), ("004-2", sample004_2), ("004-3", sample004_3), ("004-4", sample004_4),
]

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments == ["list"] {
    samples.forEach { print($0.name) }
    exit(0)
}
let chosen = arguments.isEmpty ? samples.map(\.name).filter { !$0.hasPrefix("003-setup-") } : arguments
for name in chosen {
    guard let sample = samples.first(where: { $0.name == name }) else {
        FileHandle.standardError.write(Data("SeedSamples: no sample \(name) (try: SeedSamples list)\n".utf8))
        exit(2)
    }
    sample.run()
    report(name, "done", true)
}
LocalFiles.remove()
