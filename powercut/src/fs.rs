//! The FUSE filesystem: a passthrough of the backing directory whose data writes stay in the
//! [`Overlay`] until an fsync.
//!
//! Metadata operations (create, mkdir, unlink, rename, truncate, chmod, fallocate, ...) reach
//! the backing directory at once, as a journaling filesystem's metadata would. WRITE goes into
//! the overlay; READ and GETATTR see the backing file with the overlay on top; FSYNC writes the
//! inode's dirty pages to the backing file and syncs it; FLUSH and RELEASE persist nothing. The
//! [`Control`] half, shared with the signal loop, cuts the power ([`Control::cut`]).
//!
//! Every request is answered: a failing backing call answers its errno, and an unknown inode,
//! handle or name answers `ENOENT`/`EBADF`. Entry and attribute TTLs are zero and no open keeps
//! the kernel's page cache, so after a cut a reopened file reads what survived.

use std::collections::HashMap;
use std::ffi::{CString, OsStr, OsString};
use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenAccMode, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use rand::Rng;

use crate::cut::{self, CutMode, CutReport};
use crate::inodes::{Inodes, ROOT};
use crate::overlay::Overlay;

/// How long the kernel may cache entries and attributes: not at all, so sizes are never stale.
const TTL: Duration = Duration::ZERO;

/// Running totals, printed after each cut.
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq)]
pub struct Counters {
    /// FUSE WRITE requests taken into the overlay.
    pub writes: u64,
    /// Bytes those writes carried.
    pub written_bytes: u64,
    /// FUSE FSYNC requests.
    pub fsyncs: u64,
    /// Dirty pages written to backing files by fsyncs.
    pub synced_pages: u64,
    /// Power cuts.
    pub cuts: u64,
}

/// An open file: its inode, its backing file, and whether that was opened for writing.
#[derive(Debug)]
struct Handle {
    ino: u64,
    file: Arc<File>,
    writable: bool,
}

/// One directory entry of a directory listing taken at opendir.
#[derive(Debug)]
struct Entry {
    ino: u64,
    kind: FileType,
    name: OsString,
}

/// The attribute changes of one SETATTR.
#[derive(Clone, Copy, Debug)]
struct Changes {
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    size: Option<u64>,
    atime: Option<TimeOrNow>,
    mtime: Option<TimeOrNow>,
}

/// Everything the filesystem knows, behind one lock.
#[derive(Debug)]
struct State {
    inodes: Inodes,
    overlay: Overlay,
    files: HashMap<u64, Handle>,
    dirs: HashMap<u64, Vec<Entry>>,
    next_fh: u64,
    counters: Counters,
}

impl State {
    fn new_fh(&mut self) -> u64 {
        self.next_fh += 1;
        self.next_fh
    }

    fn path(&self, ino: u64) -> Result<PathBuf, Errno> {
        self.inodes.path(ino).ok_or(Errno::ENOENT)
    }

    fn child_path(&self, parent: u64, name: &OsStr) -> Result<PathBuf, Errno> {
        self.inodes.child_path(parent, name).ok_or(Errno::ENOENT)
    }

    /// An open backing file of inode `ino`: handle `fh` if given, else any handle on it.
    fn open_file(&self, ino: u64, fh: Option<u64>) -> Option<&Arc<File>> {
        if let Some(handle) = fh.and_then(|fh| self.files.get(&fh)) {
            return Some(&handle.file);
        }
        self.files
            .values()
            .find(|handle| handle.ino == ino)
            .map(|handle| &handle.file)
    }

    fn metadata(&self, ino: u64, fh: Option<u64>) -> Result<Metadata, Errno> {
        match self.inodes.path(ino) {
            Some(path) => Ok(fs::symlink_metadata(path)?),
            None => match self.open_file(ino, fh) {
                Some(file) => Ok(file.metadata()?),
                None => Err(Errno::ENOENT),
            },
        }
    }

    fn attr(&self, ino: u64, meta: &Metadata) -> FileAttr {
        let size = if meta.is_file() {
            self.overlay.logical_size(ino, meta.len())
        } else {
            meta.len()
        };
        to_attr(ino, meta, size)
    }

    /// Looks `name` up in `parent` on the backing directory and gives it an inode number.
    fn entry(&mut self, parent: u64, name: &OsStr) -> Result<FileAttr, Errno> {
        let path = self.child_path(parent, name)?;
        let meta = fs::symlink_metadata(path)?;
        let ino = self.inodes.attach(parent, name, (meta.dev(), meta.ino()));
        Ok(self.attr(ino, &meta))
    }

    /// A backing file of inode `ino` open for writing: handle `fh` if it is writable, else any
    /// writable handle on the inode, else the backing path opened for writing.
    fn writable(&self, ino: u64, fh: Option<u64>) -> io::Result<Arc<File>> {
        let given = fh
            .and_then(|fh| self.files.get(&fh))
            .filter(|handle| handle.writable);
        let open = given.or_else(|| {
            self.files
                .values()
                .find(|handle| handle.ino == ino && handle.writable)
        });
        if let Some(handle) = open {
            return Ok(Arc::clone(&handle.file));
        }
        let path = self.inodes.path(ino).ok_or(io::ErrorKind::NotFound)?;
        Ok(Arc::new(OpenOptions::new().write(true).open(path)?))
    }

    /// Where inode `ino`'s dirty pages go when persisted; `None` if the file is gone.
    fn sink(&self, ino: u64) -> Option<Arc<File>> {
        self.writable(ino, None).ok()
    }
}

/// The state shared by the FUSE filesystem and its [`Control`].
#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The passthrough filesystem with a volatile write cache, handed to `fuser`.
#[derive(Debug)]
pub struct PowercutFs {
    shared: Arc<Shared>,
}

/// The power switch: cuts the power and reads the counters while the filesystem is mounted.
#[derive(Clone, Debug)]
pub struct Control {
    shared: Arc<Shared>,
}

impl PowercutFs {
    /// A filesystem over the backing directory `backing` (which must exist).
    pub fn new(backing: &Path) -> io::Result<Self> {
        let meta = fs::metadata(backing)?;
        if !meta.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a directory", backing.display()),
            ));
        }
        let state = State {
            inodes: Inodes::new(backing.to_path_buf(), (meta.dev(), meta.ino())),
            overlay: Overlay::new(),
            files: HashMap::new(),
            dirs: HashMap::new(),
            next_fh: 0,
            counters: Counters::default(),
        };
        Ok(PowercutFs {
            shared: Arc::new(Shared {
                state: Mutex::new(state),
            }),
        })
    }

    /// The power switch of this filesystem.
    pub fn control(&self) -> Control {
        Control {
            shared: Arc::clone(&self.shared),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.lock()
    }

    /// Writes inode `ino`'s dirty pages to its backing file and syncs it.
    fn persist(&self, ino: u64) -> Result<(), Errno> {
        let file = {
            let mut state = self.lock();
            let Some(dirty) = state.overlay.take(ino) else {
                return Ok(());
            };
            let file = match state.writable(ino, None) {
                Ok(file) => file,
                // Unlinked: nothing left to persist to.
                Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(error) => {
                    state.overlay.restore(ino, dirty);
                    return Err(error.into());
                }
            };
            // Written under the lock, so no read sees the pages in neither place.
            let mut sink = Arc::clone(&file);
            if let Err(error) = dirty.persist(&mut sink) {
                state.overlay.restore(ino, dirty);
                return Err(error.into());
            }
            state.counters.synced_pages += dirty.pages().len() as u64;
            file
        };
        file.sync_data()?;
        Ok(())
    }

    fn do_setattr(&self, ino: u64, changes: &Changes, fh: Option<u64>) -> Result<FileAttr, Errno> {
        let Changes {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        } = *changes;
        let mut state = self.lock();
        let path = state.inodes.path(ino);
        let file = state.open_file(ino, fh).cloned();
        if let Some(mode) = mode {
            let permissions = fs::Permissions::from_mode(mode & 0o7777);
            match (&file, &path) {
                (Some(file), _) => file.set_permissions(permissions)?,
                (None, Some(path)) => fs::set_permissions(path, permissions)?,
                (None, None) => return Err(Errno::ENOENT),
            }
        }
        if uid.is_some() || gid.is_some() {
            let path = path.as_ref().ok_or(Errno::ENOENT)?;
            std::os::unix::fs::lchown(path, uid, gid)?;
        }
        if let Some(size) = size {
            state.writable(ino, fh)?.set_len(size)?;
            state.overlay.truncate(ino, size);
        }
        if atime.is_some() || mtime.is_some() {
            let path = path.as_ref().ok_or(Errno::ENOENT)?;
            set_times(path, atime, mtime)?;
        }
        let meta = state.metadata(ino, fh)?;
        Ok(state.attr(ino, &meta))
    }

    fn do_create(
        &self,
        parent: u64,
        name: &OsStr,
        mode: u32,
        flags: i32,
    ) -> Result<(FileAttr, u64), Errno> {
        let mut state = self.lock();
        let path = state.child_path(parent, name)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .custom_flags(flags & libc::O_EXCL)
            .mode(mode & 0o7777)
            .open(&path)?;
        let meta = file.metadata()?;
        let ino = state.inodes.attach(parent, name, (meta.dev(), meta.ino()));
        let fh = state.new_fh();
        state.files.insert(
            fh,
            Handle {
                ino,
                file: Arc::new(file),
                writable: true,
            },
        );
        Ok((state.attr(ino, &meta), fh))
    }

    fn do_open(&self, ino: u64, flags: OpenFlags) -> Result<u64, Errno> {
        let mut state = self.lock();
        let path = state.path(ino)?;
        let (file, writable) = open_backing(&path, flags.acc_mode())?;
        let fh = state.new_fh();
        state.files.insert(
            fh,
            Handle {
                ino,
                file: Arc::new(file),
                writable,
            },
        );
        Ok(fh)
    }

    fn do_read(&self, ino: u64, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        let state = self.lock();
        let file = state.files.get(&fh).ok_or(Errno::EBADF)?.file.as_ref();
        let backing_size = file.metadata()?.len();
        let logical = state.overlay.logical_size(ino, backing_size);
        let len = u64::from(size).min(logical.saturating_sub(offset));
        let mut buf = vec![0u8; usize::try_from(len).map_err(|_| Errno::EINVAL)?];
        let from_backing = backing_size.saturating_sub(offset).min(len) as usize;
        read_full_at(file, &mut buf[..from_backing], offset)?;
        state.overlay.read_into(ino, offset, &mut buf);
        Ok(buf)
    }

    fn do_opendir(&self, ino: u64) -> Result<u64, Errno> {
        let mut state = self.lock();
        let path = state.path(ino)?;
        let mut entries = vec![
            Entry {
                ino,
                kind: FileType::Directory,
                name: ".".into(),
            },
            Entry {
                ino: state.inodes.parent(ino),
                kind: FileType::Directory,
                name: "..".into(),
            },
        ];
        for dirent in fs::read_dir(path)? {
            let dirent = dirent?;
            let name = dirent.file_name();
            let kind = dirent
                .file_type()
                .ok()
                .and_then(FileType::from_std)
                .unwrap_or(FileType::RegularFile);
            let ino = state
                .inodes
                .find(ino, &name)
                .unwrap_or_else(|| std::os::unix::fs::DirEntryExt::ino(&dirent));
            entries.push(Entry { ino, kind, name });
        }
        let fh = state.new_fh();
        state.dirs.insert(fh, entries);
        Ok(fh)
    }

    fn do_rename(
        &self,
        parent: u64,
        name: &OsStr,
        new_parent: u64,
        new_name: &OsStr,
        flags: RenameFlags,
    ) -> Result<(), Errno> {
        if flags.intersects(RenameFlags::RENAME_EXCHANGE | RenameFlags::RENAME_WHITEOUT)
            || !RenameFlags::all().contains(flags)
        {
            return Err(Errno::EINVAL);
        }
        let mut state = self.lock();
        let from = state.child_path(parent, name)?;
        let to = state.child_path(new_parent, new_name)?;
        if flags.contains(RenameFlags::RENAME_NOREPLACE) {
            rename_noreplace(&from, &to)?;
        } else {
            fs::rename(&from, &to)?;
        }
        if let Some(replaced) = state.inodes.rename(parent, name, new_parent, new_name) {
            state.overlay.take(replaced);
        }
        Ok(())
    }

    fn do_remove(&self, parent: u64, name: &OsStr, dir: bool) -> Result<(), Errno> {
        let mut state = self.lock();
        let path = state.child_path(parent, name)?;
        if dir {
            fs::remove_dir(&path)?;
        } else {
            fs::remove_file(&path)?;
        }
        if let Some(ino) = state.inodes.detach(parent, name) {
            state.overlay.take(ino);
        }
        Ok(())
    }
}

impl Control {
    /// Cuts the power: takes every dirty page out of the cache, persists a random subset of
    /// them first if `mode` is [`CutMode::Torn`], and drops the rest.
    pub fn cut(&self, mode: CutMode, rng: &mut impl Rng) -> CutReport {
        let mut state = self.shared.lock();
        state.counters.cuts += 1;
        let files = state.overlay.take_all();
        let state = &*state;
        cut::cut(files, mode, rng, |ino| state.sink(ino))
    }

    /// Writes every dirty page to its backing file (a clean shutdown); returns how many pages.
    pub fn sync_all(&self) -> usize {
        let mut state = self.shared.lock();
        let files = state.overlay.take_all();
        let mut synced = 0;
        for (ino, dirty) in files {
            if let Some(mut file) = state.sink(ino) {
                if dirty.persist(&mut file).is_ok() && file.sync_data().is_ok() {
                    synced += dirty.pages().len();
                }
            }
        }
        synced
    }

    /// Another handle on the same filesystem, to mount again after a mount that failed.
    pub fn filesystem(&self) -> PowercutFs {
        PowercutFs {
            shared: Arc::clone(&self.shared),
        }
    }

    /// The number of dirty pages in the cache now.
    pub fn dirty_pages(&self) -> usize {
        self.shared.lock().overlay.dirty_pages()
    }

    /// The running totals.
    pub fn counters(&self) -> Counters {
        self.shared.lock().counters
    }
}

impl Filesystem for PowercutFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.lock().entry(parent.0, name) {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(error) => reply.error(error),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let state = self.lock();
        match state.metadata(ino.0, fh.map(|fh| fh.0)) {
            Ok(meta) => reply.attr(&TTL, &state.attr(ino.0, &meta)),
            Err(error) => reply.error(error),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let changes = Changes {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        };
        match self.do_setattr(ino.0, &changes, fh.map(|fh| fh.0)) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(error) => reply.error(error),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let target = self
            .lock()
            .path(ino.0)
            .and_then(|path| Ok(fs::read_link(path)?));
        match target {
            Ok(target) => reply.data(target.as_os_str().as_bytes()),
            Err(error) => reply.error(error),
        }
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let mut state = self.lock();
        let made = state
            .child_path(parent.0, name)
            .and_then(|path| Ok(mknod(&path, mode, rdev)?))
            .and_then(|()| state.entry(parent.0, name));
        match made {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(error) => reply.error(error),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let mut state = self.lock();
        let made = state
            .child_path(parent.0, name)
            .and_then(|path| Ok(fs::DirBuilder::new().mode(mode & 0o7777).create(path)?))
            .and_then(|()| state.entry(parent.0, name));
        match made {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(error) => reply.error(error),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        answer(reply, self.do_remove(parent.0, name, false));
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        answer(reply, self.do_remove(parent.0, name, true));
    }

    fn symlink(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _link_name: &OsStr,
        _target: &Path,
        reply: ReplyEntry,
    ) {
        reply.error(Errno::ENOSYS);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        answer(
            reply,
            self.do_rename(parent.0, name, newparent.0, newname, flags),
        );
    }

    fn link(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _newparent: INodeNo,
        _newname: &OsStr,
        reply: ReplyEntry,
    ) {
        reply.error(Errno::ENOSYS);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.do_open(ino.0, flags) {
            // No FOPEN_KEEP_CACHE: every open drops the kernel's cached pages of the file.
            // No FOPEN_DIRECT_IO: shared writable mappings must work.
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(error) => reply.error(error),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.do_read(ino.0, fh.0, offset, size) {
            Ok(data) => reply.data(&data),
            Err(error) => reply.error(error),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let Ok(written) = u32::try_from(data.len()) else {
            reply.error(Errno::EINVAL);
            return;
        };
        let mut state = self.lock();
        state.overlay.write(ino.0, offset, data);
        state.counters.writes += 1;
        state.counters.written_bytes += u64::from(written);
        reply.written(written);
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // A close is not a sync.
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.lock().files.remove(&fh.0);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.lock().counters.fsyncs += 1;
        answer(reply, self.persist(ino.0));
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.do_opendir(ino.0) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(error) => reply.error(error),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let state = self.lock();
        let Some(entries) = state.dirs.get(&fh.0) else {
            reply.error(Errno::EBADF);
            return;
        };
        let skip = usize::try_from(offset).unwrap_or(usize::MAX);
        for (index, entry) in entries.iter().enumerate().skip(skip) {
            if reply.add(
                INodeNo(entry.ino),
                index as u64 + 1,
                entry.kind,
                &entry.name,
            ) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.lock().dirs.remove(&fh.0);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let path = self.lock().path(ino.0);
        answer(
            reply,
            path.and_then(|path| Ok(File::open(path)?.sync_all()?)),
        );
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let root = self.lock().path(ROOT);
        match root.and_then(|root| Ok(statvfs(&root)?)) {
            Ok(st) => reply.statfs(
                st.f_blocks,
                st.f_bfree,
                st.f_bavail,
                st.f_files,
                st.f_ffree,
                st.f_bsize as u32,
                st.f_namemax as u32,
                st.f_frsize as u32,
            ),
            Err(error) => reply.error(error),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        match self.do_create(parent.0, name, mode, flags) {
            Ok((attr, fh)) => reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(fh),
                FopenFlags::empty(),
            ),
            Err(error) => reply.error(error),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if mode & !libc::FALLOC_FL_KEEP_SIZE != 0 {
            // Punching or zeroing would change bytes under dirty pages: not modelled.
            reply.error(Errno::EOPNOTSUPP);
            return;
        }
        let state = self.lock();
        let Some(file) = state.open_file(ino.0, Some(fh.0)) else {
            reply.error(Errno::EBADF);
            return;
        };
        answer(reply, fallocate(file, mode, offset, length));
    }
}

/// Answers an empty reply with success or the error.
fn answer(reply: ReplyEmpty, result: Result<(), Errno>) {
    match result {
        Ok(()) => reply.ok(),
        Err(error) => reply.error(error),
    }
}

/// Opens a backing file for an open of the given access mode: read-write whenever writing was
/// asked for (the kernel may read pages of a write-only file), read-only otherwise. Returns the
/// file and whether it can be written.
fn open_backing(path: &Path, mode: OpenAccMode) -> io::Result<(File, bool)> {
    match mode {
        OpenAccMode::O_RDONLY => Ok((File::open(path)?, false)),
        OpenAccMode::O_RDWR => Ok((OpenOptions::new().read(true).write(true).open(path)?, true)),
        OpenAccMode::O_WRONLY => match OpenOptions::new().read(true).write(true).open(path) {
            Ok(file) => Ok((file, true)),
            Err(_) => Ok((OpenOptions::new().write(true).open(path)?, true)),
        },
    }
}

/// Reads exactly `buf.len()` bytes at `offset`, or up to the end of the file (the rest stays
/// as it was: zeros).
fn read_full_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

fn to_attr(ino: u64, meta: &Metadata, size: u64) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: meta.blocks(),
        atime: to_time(meta.atime(), meta.atime_nsec()),
        mtime: to_time(meta.mtime(), meta.mtime_nsec()),
        ctime: to_time(meta.ctime(), meta.ctime_nsec()),
        crtime: UNIX_EPOCH,
        kind: FileType::from_std(meta.file_type()).unwrap_or(FileType::RegularFile),
        perm: (meta.mode() & 0o7777) as u16,
        nlink: meta.nlink() as u32,
        uid: meta.uid(),
        gid: meta.gid(),
        rdev: meta.rdev() as u32,
        blksize: meta.blksize() as u32,
        flags: 0,
    }
}

fn to_time(secs: i64, nsecs: i64) -> SystemTime {
    let nanos = Duration::from_nanos(nsecs.clamp(0, 999_999_999) as u64);
    if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs as u64) + nanos
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()) + nanos
    }
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::ErrorKind::InvalidInput.into())
}

fn check(status: libc::c_int) -> io::Result<()> {
    if status == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn mknod(path: &Path, mode: u32, rdev: u32) -> io::Result<()> {
    let path = c_path(path)?;
    // SAFETY: `path` is a valid NUL-terminated string for the duration of the call.
    check(unsafe { libc::mknod(path.as_ptr(), mode, libc::dev_t::from(rdev)) })
}

fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    let (from, to) = (c_path(from)?, c_path(to)?);
    // SAFETY: both paths are valid NUL-terminated strings for the duration of the call.
    check(unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    })
}

fn set_times(path: &Path, atime: Option<TimeOrNow>, mtime: Option<TimeOrNow>) -> io::Result<()> {
    fn spec(time: Option<TimeOrNow>) -> libc::timespec {
        let (tv_sec, tv_nsec) = match time {
            None => (0, libc::UTIME_OMIT),
            Some(TimeOrNow::Now) => (0, libc::UTIME_NOW),
            Some(TimeOrNow::SpecificTime(at)) => match at.duration_since(UNIX_EPOCH) {
                Ok(since) => (since.as_secs() as libc::time_t, since.subsec_nanos() as i64),
                Err(before) => {
                    let before = before.duration();
                    (-(before.as_secs() as libc::time_t), 0)
                }
            },
        };
        libc::timespec { tv_sec, tv_nsec }
    }
    let path = c_path(path)?;
    let times = [spec(atime), spec(mtime)];
    // SAFETY: `path` is NUL-terminated and `times` holds the two entries utimensat reads.
    check(unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            path.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })
}

fn statvfs(path: &Path) -> io::Result<libc::statvfs> {
    let path = c_path(path)?;
    // SAFETY: statvfs is plain data; zeroed is a valid value that the call overwrites.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and `st` is a valid out pointer.
    check(unsafe { libc::statvfs(path.as_ptr(), &mut st) })?;
    Ok(st)
}

fn fallocate(file: &File, mode: i32, offset: u64, length: u64) -> Result<(), Errno> {
    let (Ok(offset), Ok(length)) = (libc::off_t::try_from(offset), libc::off_t::try_from(length))
    else {
        return Err(Errno::EFBIG);
    };
    // SAFETY: the descriptor is open for the duration of the call.
    check(unsafe { libc::fallocate(file.as_raw_fd(), mode, offset, length) })?;
    Ok(())
}
