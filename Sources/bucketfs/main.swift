// The executable only calls into BucketFSCLI (callbacks must never be
// defined here: top-level code in main.swift is @MainActor).
import BucketFSCLI

await BucketFSMain.run()
