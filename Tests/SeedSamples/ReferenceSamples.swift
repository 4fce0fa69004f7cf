import Foundation
import StorageKit

// Seed 000 (Thai): "Create a reference". The samples are the seed's Swift
// blocks as written (the seed flattened them to one line; the line breaks
// are back at the comments). Code before "sample:" and after "end of
// sample" is the context the seed assumes, plus reporting.

func sample000_1() {
    // sample:
    // Get a reference to the storage service using the default Firebase App
    let storage = Storage.storage()
    // Create a storage reference from our storage service
    let storageRef = storage.reference()
    // end of sample
    report("000-1", "bucket", storage.bucket)
    report("000-1", "root", storageRef.fullPath)
    report("000-1", "usable", storageRef.isUsable)
}

func sample000_2() {
    let storage = Storage.storage()
    let storageRef = storage.reference()
    let your_firebase_storage_bucket = "gs://\(storage.bucket)"
    // sample:
    // Create a child reference
    // imagesRef now points to "images"
    let imagesRef = storageRef.child("images")
    // Child references can also take paths delimited by '/'
    // spaceRef now points to "images/space.jpg"
    // imagesRef still points to "images"
    var spaceRef = storageRef.child("images/space.jpg")
    // This is equivalent to creating the full reference
    let storagePath = "\(your_firebase_storage_bucket)/images/space.jpg"
    spaceRef = storage.reference(forURL: storagePath)
    // end of sample
    report("000-2", "imagesRef", imagesRef.fullPath)
    report("000-2", "spaceRef", spaceRef.fullPath)
    report("000-2", "equivalent", spaceRef == storageRef.child("images/space.jpg"))
}

func sample000_3() {
    let spaceRef = Storage.storage().reference().child("images/space.jpg")
    // sample:
    // Parent allows us to move to the parent of a reference
    // imagesRef now points to 'images'
    let imagesRef = spaceRef.parent()
    // Root allows us to move all the way back to the top of our bucket
    // rootRef now points to the root
    let rootRef = spaceRef.root()
    // end of sample
    report("000-3", "imagesRef", imagesRef?.fullPath)
    report("000-3", "rootRef", "[\(rootRef.fullPath)]")
}

func sample000_4() {
    let spaceRef = Storage.storage().reference().child("images/space.jpg")
    // sample:
    // References can be chained together multiple times
    // earthRef points to "images/earth.jpg"
    let earthRef = spaceRef.parent()?.child("earth.jpg")
    // nilRef is nil, since the parent of root is nil
    let nilRef = spaceRef.root().parent()
    // end of sample
    report("000-4", "earthRef", earthRef?.fullPath)
    report("000-4", "nilRef", nilRef.map { $0.fullPath } ?? "nil")
}

func sample000_5() {
    let spaceRef = Storage.storage().reference().child("images/space.jpg")
    // sample:
    // Reference's path is: "images/space.jpg"
    // This is analogous to a file path on disk
    spaceRef.fullPath
    // Reference's name is the last segment of the full path: "space.jpg"
    // This is analogous to the file name
    spaceRef.name
    // Reference's bucket is the name of the storage bucket where files are stored
    spaceRef.bucket
    // end of sample
    report("000-5", "fullPath", spaceRef.fullPath)
    report("000-5", "name", spaceRef.name)
    report("000-5", "bucket", spaceRef.bucket)
}

func sample000_6() {
    // sample:
    // Points to the root reference
    let storageRef = Storage.storage().reference()
    // Points to "images"
    let imagesRef = storageRef.child("images")
    // Points to "images/space.jpg"
    // Note that you can use variables to create child values
    let fileName = "space.jpg"
    let spaceRef = imagesRef.child(fileName)
    // File path is "images/space.jpg"
    let path = spaceRef.fullPath
    // File name is "space.jpg"
    let name = spaceRef.name
    // Points to "images"
    let images = spaceRef.parent()
    // end of sample
    report("000-6", "path", path)
    report("000-6", "name", name)
    report("000-6", "images", images?.fullPath)
}
