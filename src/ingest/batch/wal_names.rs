//! The feature dictionary's side of the write-ahead log (`ingest::wal`): the names given since the
//! last append, and their replay at start, index for index.

use super::FeatureDictionary;

impl FeatureDictionary {
    /// The names of indices `from .. to` (the write-ahead log records them before the batches that
    /// use them).
    pub fn names_from(&self, from: usize, to: usize) -> Vec<String> {
        let inner = self.inner.read();
        inner.names[from.min(inner.names.len())..to.min(inner.names.len())].to_vec()
    }

    /// Replays names the write-ahead log recorded at indices `start ..`: a name the dictionary already
    /// holds at its index is checked, the next index is added; a gap or a different name is an error
    /// (the log does not belong to this checkpoint).
    pub fn restore_names(&self, start: usize, names: &[String]) -> Result<(), String> {
        let mut inner = self.inner.write();
        for (i, name) in names.iter().enumerate() {
            let at = start + i;
            match inner.names.get(at) {
                Some(held) if held == name => {}
                Some(held) => {
                    return Err(format!(
                    "feature name {name:?} logged at index {at}, where the checkpoint has {held:?}"
                ))
                }
                None if at == inner.names.len() => {
                    inner.by_name.insert(name.clone(), at as u32);
                    inner.names.push(name.clone());
                }
                None => {
                    return Err(format!(
                        "feature name {name:?} logged at index {at}, past the {} names known",
                        inner.names.len()
                    ))
                }
            }
        }
        Ok(())
    }
}
