"""A fake Docker client holding a few images, for the tests of image choice."""

from __future__ import annotations

from types import SimpleNamespace


class FakeImage:
    def __init__(self, tag: str, version: str | None = None) -> None:
        self.tags = [tag]
        labels = {"org.brokerjepsen.kafka-version": version} if version else {}
        self.attrs = {"Config": {"Labels": labels}}


class FakeDocker:
    def __init__(self, *images: FakeImage) -> None:
        self._images = images
        self.images = SimpleNamespace(list=lambda: list(self._images), get=self._get)

    def _get(self, name: str) -> FakeImage:
        import docker.errors

        for i in self._images:
            if name in i.tags:
                return i
        raise docker.errors.ImageNotFound(name)
