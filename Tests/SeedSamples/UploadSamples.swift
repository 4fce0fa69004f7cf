import Foundation
import StorageKit

// Seed 001 (Polish): "Upload files". The seed's Swift blocks as written
// (line breaks restored at the comments), with two kinds of edits only:
// "path/to/image" is a real local file, and lines marked [harness] wait
// for the completion handlers and report what the sample saw.

func sample001_1() {
    let storage = Storage.storage()
    // sample:
    // Create a root reference
    let storageRef = storage.reference()
    // Create a reference to "mountains.jpg"
    let mountainsRef = storageRef.child("mountains.jpg")
    // Create a reference to 'images/mountains.jpg'
    let mountainImagesRef = storageRef.child("images/mountains.jpg")
    // While the file names are the same, the references point to different files
    mountainsRef.name == mountainImagesRef.name // true
    mountainsRef.fullPath == mountainImagesRef.fullPath // false
    // end of sample
    report("001-1", "sameName", mountainsRef.name == mountainImagesRef.name)
    report("001-1", "sameFullPath", mountainsRef.fullPath == mountainImagesRef.fullPath)
}

func sample001_2() {
    let storageRef = Storage.storage().reference()
    let waiter = Completions("001-2")
    // sample:
    // Data in memory
    let data = Data()
    // Create a reference to the file you want to upload
    let riversRef = storageRef.child("images/rivers.jpg")
    // Upload the file to the path "images/rivers.jpg"
    let uploadTask = riversRef.putData(data, metadata: nil) { (metadata, error) in
      guard let metadata = metadata else {
        // Uh-oh, an error occurred!
        report("001-2", "error", error)  // [harness]
        waiter.done()  // [harness]
        return
      }
      // Metadata contains file metadata such as size, content-type.
      let size = metadata.size
      report("001-2", "size", size)  // [harness]
      // You can also access to download URL after upload.
      riversRef.downloadURL { (url, error) in
        guard let downloadURL = url else {
          // Uh-oh, an error occurred!
          report("001-2", "error", error)  // [harness]
          waiter.done()  // [harness]
          return
        }
        report("001-2", "downloadURL", downloadURL)  // [harness]
        waiter.done()  // [harness]
      }
    }
    // end of sample
    report("001-2", "task", uploadTask.reference.fullPath)
    waiter.wait()
}

func sample001_3() {
    let storageRef = Storage.storage().reference()
    let waiter = Completions("001-3")
    // sample:
    // File located on disk
    let localFile = URL(string: LocalFiles.image)!  // edit: a real file instead of "path/to/image"
    // Create a reference to the file you want to upload
    let riversRef = storageRef.child("images/rivers.jpg")
    // Upload the file to the path "images/rivers.jpg"
    let uploadTask = riversRef.putFile(from: localFile, metadata: nil) { metadata, error in
      guard let metadata = metadata else {
        // Uh-oh, an error occurred!
        report("001-3", "error", error)  // [harness]
        waiter.done()  // [harness]
        return
      }
      // Metadata contains file metadata such as size, content-type.
      let size = metadata.size
      report("001-3", "size", size)  // [harness]
      report("001-3", "contentType", metadata.contentType)  // [harness]
      // You can also access to download URL after upload.
      riversRef.downloadURL { (url, error) in
        guard let downloadURL = url else {
          // Uh-oh, an error occurred!
          report("001-3", "error", error)  // [harness]
          waiter.done()  // [harness]
          return
        }
        report("001-3", "downloadURL", downloadURL)  // [harness]
        waiter.done()  // [harness]
      }
    }
    // end of sample
    report("001-3", "task", uploadTask.reference.fullPath)
    waiter.wait()
}

func sample001_4() {
    let storageRef = Storage.storage().reference()
    let data = Data("mountains, from memory".utf8)
    let localFile = URL(string: LocalFiles.image)!
    let waiter = Completions("001-4", expecting: 2)
    // sample:
    // Create storage reference
    let mountainsRef = storageRef.child("images/mountains.jpg")
    // Create file metadata including the content type
    let metadata = StorageMetadata()
    metadata.contentType = "image/jpeg"
    // Upload data and metadata
    waiter.track(mountainsRef.putData(data, metadata: metadata))  // [harness] waiter.track( )
    // Upload file and metadata
    waiter.track(mountainsRef.putFile(from: localFile, metadata: metadata))  // [harness] waiter.track( )
    // end of sample
    waiter.wait()
}

/// The sample's `storageRef` is a reference to a file here: uploads to the
/// root reference are refused.
func sample001_5() {
    let storageRef = Storage.storage().reference().child("images/cancelled.bin")
    let localFile = URL(fileURLWithPath: LocalFiles.large)
    // sample:
    // Start uploading a file
    let uploadTask = storageRef.putFile(from: localFile)
    // Pause the upload
    uploadTask.pause()
    // Resume the upload
    uploadTask.resume()
    // Cancel the upload
    uploadTask.cancel()
    // end of sample
    let waiter = Completions("001-5")
    uploadTask.observe(.failure) { snapshot in
        report("001-5", "failure", (snapshot.error as? NSError).map { StorageErrorCode(rawValue: $0.code).map { "\($0)" } ?? "?" })
        waiter.done()
    }
    uploadTask.observe(.success) { _ in
        report("001-5", "success", true)
        waiter.done()
    }
    waiter.wait()
    report("001-5", "final", uploadTask.snapshot.status)
}

func sample001_6() {
    let uploadTask = Storage.storage().reference().child("images/observed.bin").putFile(from: URL(fileURLWithPath: LocalFiles.large))
    let waiter = Completions("001-6")
    // sample:
    // Add a progress observer to an upload task
    let observer = uploadTask.observe(.progress) { snapshot in
      // A progress event occured
      report("001-6", "progress", snapshot.progress!.completedUnitCount)  // [harness]
    }
    // end of sample
    report("001-6", "observer", observer)
    waiter.track(uploadTask)
    waiter.wait()
}

func sample001_7() {
    let uploadTask = Storage.storage().reference().child("images/unobserved.bin").putFile(from: URL(fileURLWithPath: LocalFiles.large))
    let waiter = Completions("001-7")
    // sample:
    // Create a task listener handle
    let observer = uploadTask.observe(.progress) { snapshot in
      // A progress event occurred
      report("001-7", "removed observer called", snapshot.progress!.completedUnitCount)  // [harness]
    }
    // Remove an individual observer
    uploadTask.removeObserver(withHandle: observer)
    // Remove all observers of a particular status
    uploadTask.removeAllObservers(for: .progress)
    // Remove all observers
    uploadTask.removeAllObservers()
    // end of sample
    waiter.track(uploadTask)
    waiter.wait()
}

/// The complete example. `storageRef` is 'images/mountains.jpg', as its
/// comment says. With `cancel`, the harness cancels the upload once it has
/// started, so that the failure observer's `.cancelled` case runs.
func sample001_8(cancel: Bool) {
    let sample = cancel ? "001-8-cancel" : "001-8"
    let storageRef = Storage.storage().reference().child(cancel ? "images/cancelled-mountains.jpg" : "images/mountains.jpg")
    let waiter = Completions(sample)
    // sample:
    // Local file you want to upload
    let localFile = URL(string: cancel ? LocalFiles.large : LocalFiles.image)!  // edit: a real file instead of "path/to/image"
    // Create the file metadata
    let metadata = StorageMetadata()
    metadata.contentType = "image/jpeg"
    // Upload file and metadata to the object 'images/mountains.jpg'
    let uploadTask = storageRef.putFile(from: localFile, metadata: metadata)
    // Listen for state changes, errors, and completion of the upload.
    uploadTask.observe(.resume) { snapshot in
      // Upload resumed, also fires when the upload starts
      report(sample, "resume", snapshot.status)  // [harness]
    }
    uploadTask.observe(.pause) { snapshot in
      // Upload paused
      report(sample, "pause", snapshot.status)  // [harness]
    }
    uploadTask.observe(.progress) { snapshot in
      // Upload reported progress
      let percentComplete = 100.0 * Double(snapshot.progress!.completedUnitCount)
        / Double(snapshot.progress!.totalUnitCount)
      report(sample, "percentComplete", percentComplete)  // [harness]
    }
    uploadTask.observe(.success) { snapshot in
      // Upload completed successfully
      report(sample, "success", snapshot.metadata?.size)  // [harness]
      waiter.done()  // [harness]
    }
    uploadTask.observe(.failure) { snapshot in
      if let error = snapshot.error as? NSError {
        switch (StorageErrorCode(rawValue: error.code)!) {
        case .objectNotFound:
          // File doesn't exist
          report(sample, "failure", "objectNotFound")  // [harness]
          break
        case .unauthorized:
          // User doesn't have permission to access file
          report(sample, "failure", "unauthorized")  // [harness]
          break
        case .cancelled:
          // User canceled the upload
          report(sample, "failure", "cancelled")  // [harness]
          break

        /* ... */

        case .unknown:
          // Unknown error occurred, inspect the server response
          report(sample, "failure", "unknown")  // [harness]
          break
        default:
          // A separate error occurred. This is a good place to retry the upload.
          report(sample, "failure", "default \(error.code)")  // [harness]
          break
        }
      }
      waiter.done()  // [harness]
    }
    // end of sample
    if cancel {
        uploadTask.observe(.progress) { snapshot in
            if snapshot.progress!.completedUnitCount > 0 { uploadTask.cancel() }
        }
    }
    waiter.wait()
}
