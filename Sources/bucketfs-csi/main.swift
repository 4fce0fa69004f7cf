// The executable only calls into CSIDriver (callbacks must never be
// defined here: top-level code in main.swift is @MainActor).
import CSIDriver

await CSIMain.run()
