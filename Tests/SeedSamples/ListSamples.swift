import Foundation
import StorageKit

// Seed 003 (Turkish): "List files". The seed's Swift blocks as written;
// lines marked [harness] report what they saw. The seeds assume objects
// under "files/uid": `listSetup` uploads `count` items and one object in a
// sub-folder ("files/uid/photos/").

func listSetup(_ sample: String, count: Int) {
    runBlocking(sample) {
        let base = Storage.storage().reference().child("files/uid")
        do {
            // A few at a time: the fake server pages, the emulator is slower.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<count {
                    if index >= 8 { try await group.next() }
                    group.addTask {
                        _ = try await base.child(String(format: "item-%04d.txt", index)).putDataAsync(Data("\(index)".utf8))
                    }
                }
                group.addTask { _ = try await base.child("photos/photo.jpg").putDataAsync(Data("photo".utf8)) }
                try await group.waitForAll()
            }
        } catch {
            report(sample, "setup-error", error)
        }
    }
}

func sample003_1() {
    let storage = Storage.storage()
    runBlocking("003-1") {
        // sample:
        let storageReference = storage.reference().child("files/uid")
        do {
          let result = try await storageReference.listAll()
          for prefix in result.prefixes {
            // The prefixes under storageReference.
            // You may call listAll(completion:) recursively on them.
            report("003-1", "prefix", prefix.fullPath)  // [harness]
          }
          for item in result.items {
            // The items under storageReference.
            report("003-1", "item", item.fullPath)  // [harness]
          }
        } catch {
          // ...
          report("003-1", "error", error)  // [harness]
        }
        // end of sample
    }
}

// sample:
func listAllPaginated(pageToken: String? = nil) async throws {
  let storage = Storage.storage()
  let storageReference = storage.reference().child("files/uid")

  let listResult: StorageListResult
  if let pageToken = pageToken {
    listResult = try await storageReference.list(maxResults: 100, pageToken: pageToken)
  } else {
    listResult = try await storageReference.list(maxResults: 100)
  }
  let prefixes = listResult.prefixes
  let items = listResult.items
  // Handle list result
  // ...
  report("003-2", "page", "\(prefixes.count) prefixes, \(items.count) items, pageToken \(pageToken == nil ? "no" : "yes")")  // [harness]
  for item in items { report("003-2", "item", item.fullPath) }  // [harness]

  // Process next page
  if let token = listResult.pageToken {
    try await listAllPaginated(pageToken: token)
  }
}
// end of sample

func sample003_2() {
    runBlocking("003-2") {
        do {
            try await listAllPaginated()
        } catch {
            report("003-2", "error", error)
        }
    }
}
