//! The inode table: FUSE inode numbers, the backing files they stand for, and their paths.
//!
//! Every file or directory the kernel has looked up gets a FUSE inode number of its own
//! ([`Inodes::attach`]), keyed by the backing file's `(st_dev, st_ino)`, so the same backing
//! file always comes back under the same number (dirty pages are kept by that number). A node
//! remembers its parent and name rather than a full path, so renaming a directory moves its
//! whole subtree at once; [`Inodes::path`] walks up to the backing root. Unlinking a name
//! ([`Inodes::detach`]) marks its node unlinked: it keeps its number for the handles still open
//! on it, but has no path any more, and the backing file's number may be reused by a new file.
//!
//! Nodes are not removed on FUSE FORGET: a file with dirty pages must keep its number while
//! the kernel has forgotten it. The table grows with the number of distinct files seen, which
//! is small in tests.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

/// The FUSE inode number of the mount's root.
pub const ROOT: u64 = 1;

/// A backing file's identity: `(st_dev, st_ino)`.
pub type BackingId = (u64, u64);

#[derive(Debug)]
struct Node {
    parent: u64,
    name: OsString,
    backing: BackingId,
    unlinked: bool,
}

/// FUSE inode numbers and what they stand for.
#[derive(Debug)]
pub struct Inodes {
    root: PathBuf,
    nodes: HashMap<u64, Node>,
    by_backing: HashMap<BackingId, u64>,
    by_name: HashMap<(u64, OsString), u64>,
    next: u64,
}

impl Inodes {
    /// A table holding only the root, the backing directory `root` whose identity is `backing`.
    pub fn new(root: PathBuf, backing: BackingId) -> Self {
        let mut nodes = HashMap::new();
        nodes.insert(
            ROOT,
            Node {
                parent: ROOT,
                name: OsString::new(),
                backing,
                unlinked: false,
            },
        );
        let mut by_backing = HashMap::new();
        by_backing.insert(backing, ROOT);
        Inodes {
            root,
            nodes,
            by_backing,
            by_name: HashMap::new(),
            next: ROOT + 1,
        }
    }

    /// The backing path of inode `ino`, or `None` if it is unknown or was unlinked.
    pub fn path(&self, ino: u64) -> Option<PathBuf> {
        let mut names = Vec::new();
        let mut at = ino;
        while at != ROOT {
            let node = self.nodes.get(&at)?;
            if node.unlinked {
                return None;
            }
            names.push(node.name.as_os_str());
            at = node.parent;
            if names.len() > 4096 {
                return None;
            }
        }
        let mut path = self.root.clone();
        path.extend(names.iter().rev());
        Some(path)
    }

    /// The backing path of entry `name` in directory `parent`.
    pub fn child_path(&self, parent: u64, name: &OsStr) -> Option<PathBuf> {
        if name.is_empty() || name == "." || name == ".." || name.as_encoded_bytes().contains(&b'/')
        {
            return None;
        }
        self.path(parent).map(|dir| dir.join(name))
    }

    /// The inode number of the backing file `backing`, found as `name` in `parent`: the number
    /// it already had, or a new one. Records `name` in `parent` as its place.
    pub fn attach(&mut self, parent: u64, name: &OsStr, backing: BackingId) -> u64 {
        let key = (parent, name.to_os_string());
        if let Some(&ino) = self.by_backing.get(&backing) {
            if ino == ROOT {
                return ROOT;
            }
            if let Some(node) = self.nodes.get_mut(&ino) {
                if node.parent != parent || node.name != name {
                    let old = (
                        node.parent,
                        std::mem::replace(&mut node.name, key.1.clone()),
                    );
                    node.parent = parent;
                    if self.by_name.get(&old) == Some(&ino) {
                        self.by_name.remove(&old);
                    }
                }
            }
            if let Some(previous) = self.by_name.insert(key, ino) {
                if previous != ino {
                    self.mark_unlinked(previous);
                }
            }
            return ino;
        }
        let ino = self.next;
        self.next += 1;
        self.nodes.insert(
            ino,
            Node {
                parent,
                name: key.1.clone(),
                backing,
                unlinked: false,
            },
        );
        self.by_backing.insert(backing, ino);
        if let Some(previous) = self.by_name.insert(key, ino) {
            // Whatever had this name before (replaced behind our back) is no longer there.
            self.mark_unlinked(previous);
        }
        ino
    }

    /// The parent directory of inode `ino` (the root is its own parent).
    pub fn parent(&self, ino: u64) -> u64 {
        self.nodes.get(&ino).map_or(ROOT, |node| node.parent)
    }

    /// The inode number known for `name` in `parent`, if any.
    pub fn find(&self, parent: u64, name: &OsStr) -> Option<u64> {
        self.by_name.get(&(parent, name.to_os_string())).copied()
    }

    /// Forgets `name` in `parent` (it was unlinked or replaced) and returns its inode number.
    pub fn detach(&mut self, parent: u64, name: &OsStr) -> Option<u64> {
        let ino = self.by_name.remove(&(parent, name.to_os_string()))?;
        self.mark_unlinked(ino);
        Some(ino)
    }

    /// Moves `name` in `parent` to `new_name` in `new_parent`. Returns the inode number of what
    /// the move replaced, if it was known (it is now unlinked).
    pub fn rename(
        &mut self,
        parent: u64,
        name: &OsStr,
        new_parent: u64,
        new_name: &OsStr,
    ) -> Option<u64> {
        let moved = self.by_name.remove(&(parent, name.to_os_string()));
        let replaced = self.detach(new_parent, new_name);
        if let Some(ino) = moved {
            if let Some(node) = self.nodes.get_mut(&ino) {
                node.parent = new_parent;
                node.name = new_name.to_os_string();
            }
            self.by_name
                .insert((new_parent, new_name.to_os_string()), ino);
        }
        replaced.filter(|&ino| Some(ino) != moved)
    }

    fn mark_unlinked(&mut self, ino: u64) {
        if ino == ROOT {
            return;
        }
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.unlinked = true;
            if self.by_backing.get(&node.backing) == Some(&ino) {
                self.by_backing.remove(&node.backing);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Inodes {
        Inodes::new(PathBuf::from("/b"), (1, 100))
    }

    #[test]
    fn paths_follow_parents_and_renames() {
        let mut t = table();
        let dir = t.attach(ROOT, OsStr::new("d"), (1, 200));
        let file = t.attach(dir, OsStr::new("f"), (1, 300));
        assert_eq!(t.path(file), Some(PathBuf::from("/b/d/f")));
        assert_eq!(t.attach(dir, OsStr::new("f"), (1, 300)), file);
        t.rename(ROOT, OsStr::new("d"), ROOT, OsStr::new("e"));
        assert_eq!(t.path(file), Some(PathBuf::from("/b/e/f")));
        assert_eq!(t.find(ROOT, OsStr::new("e")), Some(dir));
        assert_eq!(t.find(ROOT, OsStr::new("d")), None);
        assert_eq!(t.path(ROOT), Some(PathBuf::from("/b")));
        assert_eq!(t.child_path(dir, OsStr::new("..")), None);
    }

    #[test]
    fn an_unlinked_file_loses_its_path_and_its_backing_number() {
        let mut t = table();
        let file = t.attach(ROOT, OsStr::new("f"), (1, 300));
        assert_eq!(t.detach(ROOT, OsStr::new("f")), Some(file));
        assert_eq!(t.path(file), None);
        let again = t.attach(ROOT, OsStr::new("f"), (1, 300));
        assert_ne!(again, file, "a reused backing inode is a new file");
    }

    #[test]
    fn a_rename_over_a_file_unlinks_it() {
        let mut t = table();
        let a = t.attach(ROOT, OsStr::new("a"), (1, 1));
        let b = t.attach(ROOT, OsStr::new("b"), (1, 2));
        assert_eq!(
            t.rename(ROOT, OsStr::new("a"), ROOT, OsStr::new("b")),
            Some(b)
        );
        assert_eq!(t.path(a), Some(PathBuf::from("/b/b")));
        assert_eq!(t.path(b), None);
    }
}
