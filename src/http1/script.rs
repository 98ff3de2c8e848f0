//! A scripted stream for the tests of `http1` and of its users.

use std::io::{self, Read, Write};

use super::Timed;
use crate::deadline::Deadline;

/// Bytes handed out `step` at a time; past them, the end of the stream (`hang: false`) or a
/// deadline that passes (`hang: true`). What is written is kept.
pub(crate) struct Script {
    data: Vec<u8>,
    step: usize,
    hang: bool,
    pub(crate) written: Vec<u8>,
}

impl Script {
    pub(crate) fn new(data: &[u8], step: usize) -> Script {
        Script {
            data: data.to_vec(),
            step,
            hang: false,
            written: Vec::new(),
        }
    }

    pub(crate) fn hanging(data: &[u8]) -> Script {
        Script {
            hang: true,
            ..Script::new(data, usize::MAX)
        }
    }
}

impl Read for Script {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.data.is_empty() && self.hang {
            return Err(io::ErrorKind::TimedOut.into());
        }
        let n = self.data.len().min(self.step).min(buf.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data.drain(..n);
        Ok(n)
    }
}

impl Write for Script {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.written.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Timed for Script {
    fn set_deadline(&mut self, _: Deadline) {}
}
