import Foundation
import StorageKit

// Seeds 002 (Thai, completion handlers) and 004 (Korean, async/await):
// "Use file metadata". The seeds' Swift blocks as written; lines marked
// [harness] wait for the completion handlers and report what they saw.
// The seeds assume 'images/forest.jpg' exists: `forestSetup` uploads it
// unless it does (so 002-3 sees what 002-2 left).

private func forestSetup(_ sample: String) {
    Setup.objectIfMissing("images/forest.jpg", Data("a forest".utf8), sample: sample)
}

func sample002_1() {
    forestSetup("002-1")
    let storageRef = Storage.storage().reference()
    let waiter = Completions("002-1")
    // sample:
    // Create reference to the file whose metadata we want to retrieve
    let forestRef = storageRef.child("images/forest.jpg")

    // Get metadata properties
    forestRef.getMetadata { metadata, error in
      if let error = error {
        // Uh-oh, an error occurred!
        report("002-1", "error", error)  // [harness]
      } else {
        // Metadata now contains the metadata for 'images/forest.jpg'
        report("002-1", "name", metadata!.name)  // [harness]
        report("002-1", "size", metadata!.size)  // [harness]
      }
      waiter.done()  // [harness]
    }
    // end of sample
    waiter.wait()
}

func sample002_2() {
    forestSetup("002-2")
    let storageRef = Storage.storage().reference()
    let waiter = Completions("002-2")
    // sample:
    // Create reference to the file whose metadata we want to change
    let forestRef = storageRef.child("images/forest.jpg")

    // Create file metadata to update
    let newMetadata = StorageMetadata()
    newMetadata.cacheControl = "public,max-age=300"
    newMetadata.contentType = "image/jpeg"

    // Update metadata properties
    forestRef.updateMetadata(newMetadata) { metadata, error in
      if let error = error {
        // Uh-oh, an error occurred!
        report("002-2", "error", error)  // [harness]
      } else {
        // Updated metadata for 'images/forest.jpg' is returned
        report("002-2", "cacheControl", metadata!.cacheControl)  // [harness]
        report("002-2", "contentType", metadata!.contentType)  // [harness]
      }
      waiter.done()  // [harness]
    }
    // end of sample
    waiter.wait()
}

func sample002_3() {
    forestSetup("002-3")
    let forestRef = Storage.storage().reference().child("images/forest.jpg")
    let waiter = Completions("002-3")
    // sample:
    let newMetadata = StorageMetadata()
    newMetadata.contentType = nil

    // Delete the metadata property
    forestRef.updateMetadata(newMetadata) { metadata, error in
      if let error = error {
        // Uh-oh, an error occurred!
        report("002-3", "error", error)  // [harness]
      } else {
        // metadata.contentType should be nil
        report("002-3", "contentType", metadata!.contentType)  // [harness]
      }
      waiter.done()  // [harness]
    }
    // end of sample
    waiter.wait()
}

func sample002_4() {
    // sample:
    let metadata = [
      "customMetadata": [
        "location": "Yosemite, CA, USA",
        "activity": "Hiking"
      ]
    ]
    // end of sample
    uploadWithDictionary(metadata, to: "images/yosemite.jpg", sample: "002-4")
}

/// Firebase's `StorageMetadata(dictionary:)` takes the sample's dictionary.
private func uploadWithDictionary(_ metadata: [String: [String: String]], to path: String, sample: String) {
    runBlocking(sample) {
        do {
            let stored = try await Storage.storage().reference().child(path)
                .putDataAsync(Data("hiking".utf8), metadata: StorageMetadata(dictionary: metadata))
            report(sample, "customMetadata", stored.customMetadata?.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ";"))
        } catch {
            report(sample, "error", error)
        }
    }
}

func sample004_1() {
    forestSetup("004-1")
    let storageRef = Storage.storage().reference()
    runBlocking("004-1") {
        // sample:
        // Create reference to the file whose metadata we want to retrieve
        let forestRef = storageRef.child("images/forest.jpg")
        // Get metadata properties
        do {
          let metadata = try await forestRef.getMetadata()
          report("004-1", "name", metadata.name)  // [harness]
        } catch {
          // ...
          report("004-1", "error", error)  // [harness]
        }
        // end of sample
    }
}

func sample004_2() {
    forestSetup("004-2")
    let storageRef = Storage.storage().reference()
    runBlocking("004-2") {
        // sample:
        // Create reference to the file whose metadata we want to change
        let forestRef = storageRef.child("images/forest.jpg")
        // Create file metadata to update
        let newMetadata = StorageMetadata()
        newMetadata.cacheControl = "public,max-age=300"
        newMetadata.contentType = "image/jpeg"
        // Update metadata properties
        do {
          let updatedMetadata = try await forestRef.updateMetadata(newMetadata)
          report("004-2", "cacheControl", updatedMetadata.cacheControl)  // [harness]
        } catch {
          // ...
          report("004-2", "error", error)  // [harness]
        }
        // end of sample
    }
}

func sample004_3() {
    forestSetup("004-3")
    let forestRef = Storage.storage().reference().child("images/forest.jpg")
    runBlocking("004-3") {
        // sample:
        let newMetadata = StorageMetadata()
        newMetadata.contentType = nil
        do {
          // Delete the metadata property
          let updatedMetadata = try await forestRef.updateMetadata(newMetadata)
          report("004-3", "contentType", updatedMetadata.contentType)  // [harness]
        } catch {
          // ...
          report("004-3", "error", error)  // [harness]
        }
        // end of sample
    }
}

func sample004_4() {
    // sample:
    let metadata = [ "customMetadata": [ "location": "Yosemite, CA, USA", "activity": "Hiking" ] ]
    // end of sample
    uploadWithDictionary(metadata, to: "images/yosemite-korean.jpg", sample: "004-4")
}
