import Foundation
import Synchronization
import Testing
@testable import StorageKit

/// A finished upload task must be freed once its caller lets go of it: a
/// mount uploads millions of files, and a task that outlived its upload
/// kept its uploader and its worker's task memory (about 11 KiB an upload).
@Suite struct UploadTaskLifetimeTests {
    let storage: Storage
    let prefix = TestEnv.uniquePrefix("lifetime")

    init() throws {
        storage = try TestEnv.emulator()
    }

    /// Runs `make`, waits for the task's end through `completion()` and
    /// through an observer attached after the fact (the replayed history),
    /// drops every strong reference, and returns a weak one.
    private func finishedTask(
        _ make: () -> StorageUploadTask
    ) async -> (weak: WeakTask, ended: StorageTaskStatus?) {
        let task = make()
        _ = try? await task.completion()
        let ended = Mutex<StorageTaskStatus?>(nil)
        task.observe(.success) { snapshot in ended.withLock { $0 = snapshot.status } }
        task.observe(.failure) { snapshot in ended.withLock { $0 = snapshot.status } }
        #expect(task.snapshot.task === task)
        return (WeakTask(task), ended.withLock { $0 })
    }

    final class WeakTask: @unchecked Sendable {
        weak var task: StorageUploadTask?
        init(_ task: StorageUploadTask) { self.task = task }
    }

    /// The task's worker may still be unwinding for a moment after it
    /// resumed `completion()`.
    private func isFreed(_ weak: WeakTask) async -> Bool {
        for _ in 0..<200 {
            if weak.task == nil { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return weak.task == nil
    }

    @Test func aSucceededUploadIsFreed() async throws {
        let ref = storage.reference().child("\(prefix)/ok.txt")
        let (weak, ended) = await finishedTask { ref.putData(Data("bytes".utf8)) }
        #expect(ended == .success)
        #expect(await isFreed(weak))
    }

    @Test func anUploadTheServerRefusesIsFreed() async throws {
        let missing = try TestEnv.storage("BUCKETFS_TEST_EMULATOR", bucket: "no-such-bucket-\(prefix.lowercased())")
        let ref = missing.reference().child("\(prefix)/refused.txt")
        let (weak, ended) = await finishedTask { ref.putData(Data("x".utf8)) }
        #expect(ended == .failure)
        #expect(await isFreed(weak))
    }

    @Test func anUploadThatCannotStartIsFreed() async throws {
        // Data cannot be uploaded to the root: the task fails at once.
        let (weak, ended) = await finishedTask { storage.reference().putData(Data("x".utf8)) }
        #expect(ended == .failure)
        #expect(await isFreed(weak))
    }

    @Test func aFileUploadWithProgressObserversIsFreed() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-file")
        try Data(repeating: 7, count: 300_000).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let ref = storage.reference().child("\(prefix)/file.bin")
        let (weak, ended) = await finishedTask {
            let task = ref.putFile(from: file)
            task.observe(.progress) { _ in }
            return task
        }
        #expect(ended == .success)
        #expect(await isFreed(weak))
    }
}
