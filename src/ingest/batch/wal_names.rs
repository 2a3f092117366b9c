//! The feature dictionary's side of the write-ahead log (`ingest::wal`): the replay at start of the
//! names the log recorded, index for index. (The names given since the last append are read with
//! [`FeatureDictionary::names_from`].)

use super::FeatureDictionary;

impl FeatureDictionary {
    /// Replays names the write-ahead log recorded at indices `start ..`: a name the dictionary already
    /// holds at its index is checked, the next index is added; a gap or a different name is an error
    /// (the log does not belong to this checkpoint). Replayed names make the daemon's features named.
    pub fn restore_names(&self, start: usize, names: &[String]) -> Result<(), String> {
        let mut inner = self.write();
        for (i, name) in names.iter().enumerate() {
            let at = start + i;
            match inner.get(at) {
                Some(held) if held == name => {}
                Some(held) => return Err(mismatch(name, at, held)),
                None if at == inner.len() => {
                    inner.push(name);
                }
                None => {
                    return Err(format!(
                        "feature name {name:?} logged at index {at}, past the {} names known",
                        inner.len()
                    ))
                }
            }
        }
        if !names.is_empty() {
            self.set_names_kind(&inner);
        }
        Ok(())
    }
}

/// The error of a logged name that differs from the one the checkpoint holds at its index.
fn mismatch(name: &str, at: usize, held: &str) -> String {
    format!("feature name {name:?} logged at index {at}, where the checkpoint has {held:?}")
}
