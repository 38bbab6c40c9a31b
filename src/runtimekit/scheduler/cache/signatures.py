"""The scheduler's check of bound pods' assignment signatures, with its key ring, before their events
reach the cluster cache. The cluster cache must not hold the key: plugins reach the cache (a
binding's volumes lead to it; docs/security.md#custom-plugins), so the live side holds this check
beside the binder's signer and hands the cache each bound pod's outcome as a `Seal` value
(`cache/authority.py` decides what to book from it).

`SignatureCheck.seal` is called on the pods informer's thread (`LiveCache.on_pod`) for every pod
event. It verifies a bound pod's signature once per annotation text and signature: a pod's later
events cost a hash of the two and a dict lookup, and an HMAC is made again
only for a signature that did not verify, when the key ring has changed since (a key may have come).
A pod deleted or terminated is forgotten.
`vouch` is called by the binder (`BinderPool`) right after it signed an assignment with a key of the
same ring: the bound pod's event then finds the verdict an HMAC check would give (the key that
signed is one the ring verifies with, and a key's id is a hash of its secret), so the scheduler does
not check again, on every binding, the signature it has just made; any other text or signature on
that pod is checked as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtimekit.base.keyring import KeyRing, key_id_of
from runtimekit.kube.objects import Pod, meta
from runtimekit.model.authority import signature_problem
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.cache.authority import VERIFIED, Seal
from runtimekit.scheduler.cache.objects import is_terminated


@dataclass(frozen=True, slots=True)
class _Sealed:
    digest: int  # of the annotation text and signature judged (not the strings: they would outlive the manifest)
    generation: int
    seal: Seal


class SignatureCheck:
    """See the module docstring. Called from one thread at a time (the pods informer's); a race would
    only check a signature twice (each dict operation is atomic)."""

    def __init__(self, protocol: KitProtocol, keys: KeyRing) -> None:
        self.keys = keys
        self._names = (protocol.annotations.assignment, protocol.annotations.assignment_signature)
        self._sealed: dict[str, _Sealed] = {}

    def vouch(self, uid: str, text: str, signature: str) -> None:
        """`signature`, of `text` for pod `uid`, was just made by the scheduler's signer: verified
        when the ring holds the key it names (see the module docstring)."""
        if uid and key_id_of(signature) in self.keys.key_ids:
            self._sealed[uid] = _Sealed(hash((text, signature)), self.keys.generation, VERIFIED)

    def seal(self, kind: str, pod: Pod) -> Seal | None:
        """The check of the signature of a bound pod's assignment; None for a pod that is not bound,
        has no assignment, or is gone (then forgotten)."""
        m = meta(pod)
        uid = str(m.get("uid") or "")
        if kind == "DELETED" or is_terminated(pod):
            self._sealed.pop(uid, None)
            return None
        annotations = m.get("annotations") or {}
        text = annotations.get(self._names[0])
        if not text or not (pod.get("spec") or {}).get("nodeName"):
            return None
        text, signature = str(text), str(annotations.get(self._names[1]) or "")
        digest = hash((text, signature))  # SipHash, keyed per process: no text is made to match another's
        seen = self._sealed.get(uid)
        if seen is not None and seen.digest == digest:
            if seen.seal is VERIFIED:
                return VERIFIED
            if seen.generation == self.keys.generation:  # (the ring looks for a changed key folder first)
                return seen.seal
        held = self.keys.key_ids
        generation = self.keys.generation
        problem = signature_problem(self.keys, uid, text, signature or None)
        key_id = key_id_of(signature)
        seal = Seal(problem, bool(key_id) and key_id not in held) if problem else VERIFIED
        self._sealed[uid] = _Sealed(digest, generation, seal)
        return seal
