"""A file made from another, trusted no more than that one: bound to both files' content, under a key.

speed/accelerate.py keeps a converted copy of model.safetensors beside it, model.blocked.safetensors,
because converting gpt2-xl takes seconds. Such a derived file is only worth keeping if the next run
can tell, without redoing the work, that it is still what was made from the source as it is now.
A record beside them (bind) says so:

    {"recipe": how the derived file was made (its layout's version),
     "source":  {"name", "identity", "sha256"},   the file it was made from,
     "derived": {"name", "identity", "sha256"},   the file made and checked,
     "hmac":    HMAC-SHA256 of the rest, under the directory's key}

identity is which file and its last change (device, inode, size, modification and change time): the
kernel sets the change time at every write and every change of the times, to the present, and no call
sets it to a chosen value. So a file whose identity is the one recorded holds the bytes that were
hashed; a new identity (a copy, a touch, an editor's save, a restore) costs one SHA-256 of the file,
compared with the recorded one, and the record is then renewed (bound: "checked once per identity").

The key (KEY_FILE, 32 random bytes, made on first use) is readable by its owner alone, and a key that
is not the running user's own, or that others may read or write, is not used. Without it a record
cannot be written that bound() accepts: not by hand, not by a program that edits the derived file and
writes its new identity or SHA-256 beside it, not by another user who can write the directory. Whoever
can read the key (the owner, and any program the owner runs) can forge a record, as they can rewrite
the source itself; SECURITY.md says what is guarded and what is not.
"""

import hashlib
import hmac
import json
import os
import secrets

from weights import files, reading

KEY_FILE = "derived.key"
KEY_BYTES = 32
IDENTITY = os.name == "posix"  # st_ctime is the last change there; on Windows the file's creation: always rehashed


def identity(st):
    """Which file st is and its last change, "device:inode:size:mtime:ctime" (ns), as the kernel keeps them."""
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def sha256_of(path):
    """(the SHA-256 of the regular file at path, in hex; the identity of the very file read). OSError, ReadError.
    Hashed through a mapping (reading.map_read_only): no memory is allocated in proportion to the file."""
    with reading.open_regular(path) as f:
        st = os.fstat(f.fileno())
        if not st.st_size:  # nothing to map
            return hashlib.sha256().hexdigest(), identity(st)
        pages = reading.map_read_only(f, path)
        try:
            return hashlib.sha256(pages).hexdigest(), identity(st)
        finally:
            pages.close()


def key_of(directory, make=False):
    """The key of the records in directory, or None where there is none that may be used (why_no_key); a
    missing one is made when make (an OSError or WriteError where it cannot be)."""
    path = os.path.join(directory, KEY_FILE)
    try:
        with reading.open_regular(path, KEY_BYTES, "key") as f:
            st, key = os.fstat(f.fileno()), f.read(KEY_BYTES + 1)
    except FileNotFoundError:
        if not make:
            return None
        try:
            files.create_private(path, secrets.token_bytes(KEY_BYTES))
        except FileExistsError:  # another run made it first: theirs is the key
            pass
        return key_of(directory)
    except (OSError, reading.ReadError):  # unreadable (another user's), a FIFO, too big
        return None
    if os.name == "posix" and (st.st_uid != os.geteuid() or st.st_mode & 0o077):
        return None
    return key if len(key) == KEY_BYTES else None


def why_no_key(directory):
    """Why the key in directory may not be used (a phrase), or None: it is there and usable, or there is none
    yet. One not usable is never replaced (it may be another user's): it is said, to be removed."""
    path = os.path.join(directory, KEY_FILE)
    if not os.path.lexists(path) or key_of(directory) is not None:
        return None
    return (f"{reading.shown(path)} is not a key of this user's alone (a file of {KEY_BYTES} bytes that only its "
            "owner may read and write): remove it, and a new one is made")


def signed(key, record):
    """The HMAC-SHA256 of a record (a dict without its "hmac"), in hex."""
    return hmac.new(key, json.dumps(record, sort_keys=True).encode(), hashlib.sha256).hexdigest()


def bind(record_path, derived, source, recipe, source_seen=None):
    """Record, signed with the key of record_path's directory (made if missing), that the file at derived was
    made by recipe from the file at source, and checked. source_seen: (SHA-256, identity) of the source as it
    was read to make derived, taken before it was read (a source replaced meanwhile then no longer matches);
    else the source is hashed now. Written through weights/files.py: an OSError naming the record, or a
    WriteError, where it cannot be."""
    directory = os.path.dirname(os.path.abspath(record_path))
    key = key_of(directory, make=True)
    if key is None:
        raise files.WriteError(why_no_key(directory) or f"{reading.shown(os.path.join(directory, KEY_FILE))}: "
                               "cannot be read back")
    source_sha, source_identity = source_seen or sha256_of(source)
    derived_sha, derived_identity = sha256_of(derived)
    write(record_path, key, {"recipe": recipe,
                             "source": entry(source, source_identity, source_sha),
                             "derived": entry(derived, derived_identity, derived_sha)})


def entry(path, file_identity, sha):
    return {"name": os.path.basename(path), "identity": file_identity, "sha256": sha}


def write(record_path, key, record):
    files.write_text(record_path, json.dumps({**record, "hmac": signed(key, record)}))


def bound(record_path, derived, source, recipe, derived_stat=None):
    """None when the record at record_path says, under its directory's key, that the file at derived was made
    by recipe from the file at source, and both are still the files recorded: the same identity, or the same
    SHA-256 (a copy, a touch: the record is then renewed, where it can be). Else why not: a phrase that
    follows the derived file's name ("has changed since it was made and checked"). derived_stat: the
    os.stat_result of derived as the caller has it open (what is checked is what is used)."""
    key = key_of(os.path.dirname(os.path.abspath(record_path)))
    record = read(record_path)
    if key is None or record is None or not hmac.compare_digest(str(record.get("hmac")), signed(key, without_hmac(record))):
        return f"has no signed record of its check ({os.path.basename(record_path)}, signed with {KEY_FILE})"
    if record.get("recipe") != recipe:
        return "was made in another layout"
    renewed = dict(record)
    for role, path, st, problem in (("source", source, None, f"was made from a {os.path.basename(source)} that has "
                                                              "changed since"),
                                    ("derived", derived, derived_stat, "has changed since it was made and checked")):
        recorded = record.get(role)
        if not isinstance(recorded, dict) or recorded.get("name") != os.path.basename(path):
            return problem
        try:
            now = identity(st or os.stat(path))
            if IDENTITY and now == recorded.get("identity"):
                continue
            sha, seen = sha256_of(path)
        except (OSError, reading.ReadError):
            return problem
        if sha != recorded.get("sha256") or seen != now:  # other bytes; or changed again while hashed
            return problem
        renewed[role] = entry(path, now, sha)
    if renewed != record:  # a new identity, the same bytes: remembered, so that the next load need not hash
        try:
            write(record_path, key, without_hmac(renewed))
        except (OSError, files.WriteError):  # a read-only directory: hashed again next time
            pass
    return None


def without_hmac(record):
    return {k: v for k, v in record.items() if k != "hmac"}


def read(record_path):
    """The record at record_path as a dict, or None where there is none to read (missing, not JSON, a FIFO,
    too big). A Ctrl-C while reading it is a KeyboardInterrupt, never taken for a missing record."""
    try:
        record = json.loads(reading.read_text(record_path, "record"))
    except (OSError, ValueError, RecursionError, reading.ReadError):
        return None
    return record if isinstance(record, dict) else None

