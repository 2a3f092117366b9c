//! Reading the little-endian binary files that hold samples (the checkpoint's window, the write-ahead
//! log's records): a cursor over bytes whose every read is checked against the end.

/// A cursor over `bytes`: each read takes the next bytes or is the error `ends_early` (the caller's
/// words for data that stops short).
pub struct ByteReader<'a> {
    bytes: &'a [u8],
    at: usize,
    ends_early: &'static str,
}

impl<'a> ByteReader<'a> {
    /// A cursor at the start of `bytes`; a read past their end is the error `ends_early`.
    pub fn new(bytes: &'a [u8], ends_early: &'static str) -> ByteReader<'a> {
        ByteReader {
            bytes,
            at: 0,
            ends_early,
        }
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or(self.ends_early)?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    pub fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    pub fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    pub fn f64(&mut self) -> Result<f64, String> {
        Ok(f64::from_le_bytes(self.array()?))
    }

    /// A sparse row as both files store it: `nnz u32 | indices u32 × nnz | values f64 × nnz`.
    pub fn sparse_row(&mut self) -> Result<(Vec<u32>, Vec<f64>), String> {
        let nnz = self.u32()? as usize;
        let indices = (0..nnz)
            .map(|_| self.u32())
            .collect::<Result<Vec<_>, _>>()?;
        let values = (0..nnz)
            .map(|_| self.f64())
            .collect::<Result<Vec<_>, _>>()?;
        Ok((indices, values))
    }

    /// Whether every byte has been read.
    pub fn at_end(&self) -> bool {
        self.at == self.bytes.len()
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        Ok(self.take(N)?.try_into().expect("take returns N bytes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_in_order_and_names_an_early_end() {
        let mut bytes = vec![7u8];
        bytes.extend_from_slice(&2u32.to_le_bytes());
        bytes.extend_from_slice(&3u32.to_le_bytes());
        bytes.extend_from_slice(&9u32.to_le_bytes());
        bytes.extend_from_slice(&1.5f64.to_le_bytes());
        bytes.extend_from_slice(&(-2.0f64).to_le_bytes());
        bytes.extend_from_slice(&u64::MAX.to_le_bytes());
        let mut r = ByteReader::new(&bytes, "stops short");
        assert_eq!(r.u8(), Ok(7));
        assert_eq!(r.sparse_row(), Ok((vec![3, 9], vec![1.5, -2.0])));
        assert!(!r.at_end());
        assert_eq!(r.u64(), Ok(u64::MAX));
        assert!(r.at_end());
        assert_eq!(r.u32(), Err("stops short".to_string()));
        assert_eq!(r.take(usize::MAX), Err("stops short".to_string()));
    }
}
