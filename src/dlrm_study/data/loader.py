"""Input overlapped with compute: batches made on a background thread, a few steps ahead."""

import queue
import threading
from collections.abc import Callable, Iterable, Iterator

import torch

from dlrm_study.data.batch import Batch, StagedBatch

_END = object()


class Prefetcher:
    """Iterates `batches`, making up to `depth` of them ahead on one background thread.

    The thread runs its torch ops on `threads` intra-op threads (1 by default) so that it
    takes one core's share, not a second full team beside the training threads. An error
    in the producer is raised in the consumer at the batch where it happened.
    """

    def __init__(self, batches: Iterator[Batch], depth: int = 2, threads: int = 1) -> None:
        self.batches, self.threads = batches, threads
        self.queue: queue.Queue = queue.Queue(maxsize=depth)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._produce, name="dlrm-prefetch", daemon=True)
        self.thread.start()

    def _produce(self) -> None:
        torch.set_num_threads(self.threads)  # per thread under OpenMP: the trainer's count is untouched
        try:
            for batch in self.batches:
                if not self._put(batch):
                    return
        except BaseException as err:  # handed to the consumer, raised there
            self._put(err)
            return
        self._put(_END)

    def _put(self, item: object) -> bool:
        while not self.stopped.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> "Prefetcher":
        return self

    def __next__(self) -> Batch:
        item = self.queue.get()
        if item is _END:
            raise StopIteration
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        """Stop the producer (it exits at its next batch)."""
        self.stopped.set()
        self.thread.join(timeout=5)


def device_feed(batches: Iterable[Batch], place: Callable[[Batch], Batch], device: torch.device) -> Iterator[Batch]:
    # (StagedBatch alike: anything with `tensors()`.)
    """`place(batch)` for each batch; on a GPU, copied on a side stream one batch ahead.

    `place` pins the batch and copies it without blocking; issuing batch i+1's copy on its
    own stream before batch i is handed out lets the copy run while batch i trains.
    """
    if device.type != "cuda":
        yield from map(place, batches)
        return
    stream = torch.cuda.Stream(device)
    ahead: tuple[Batch, torch.cuda.Event] | None = None
    for batch in batches:
        with torch.cuda.stream(stream):
            copied = place(batch)
            ready = stream.record_event()
        if ahead is not None:
            yield wait_for(*ahead)
        ahead = (copied, ready)
    if ahead is not None:
        yield wait_for(*ahead)


def wait_for(batch: Batch | StagedBatch, ready: torch.cuda.Event) -> Batch | StagedBatch:
    """The batch, once its copy is done, safe to use (and later free) on the current stream."""
    current = torch.cuda.current_stream()
    current.wait_event(ready)
    for tensor in batch.tensors():
        if tensor.is_cuda:
            tensor.record_stream(current)
    return batch
