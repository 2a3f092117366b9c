//! `thresher fit` / `thresher predict` end to end through the binary.
