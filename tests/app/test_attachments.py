"""Attachments (attachments.py, web/attachment_files.py): the limits and the type told by the bytes,
the no-JS form and the JSON API, who may fetch one (the turn's viewers only), what is sent upstream
(input_image and input_file parts) and Regenerate keeping them. No upstream is reached here; the
simulator's words about them and the round trip through a runner are in tests/relay/test_attachments_relay.py."""

from __future__ import annotations

import base64
import struct
import uuid
import zlib
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from responses_app import attachments, selectors, services, shares, submission
from responses_app.models import Attachment, ResponseRequest
from responses_app.relay.bodies import build_body
from responses_app.sniff import sniff
from tests.conftest import relay_check_errors

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_upstream", "memory_storage")]


def png(width: int = 3, height: int = 2) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x10\x80\xf0" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


PNG = png()
PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
EXE = b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff\x00\x00"


@pytest.fixture
def memory_storage(settings: Any) -> None:
    settings.STORAGES = {**settings.STORAGES, "default": {"BACKEND": "django.core.files.storage.InMemoryStorage"}}


def upload(name: str, data: bytes, content_type: str = "application/octet-stream") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type=content_type)


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def send(owner: Any, *files: SimpleUploadedFile, text: str = "What is this?") -> ResponseRequest:
    """A first turn with these files, through the no-JS form of the conversation list."""
    response = client_for(owner).post(reverse("responses_app:conversation-new"), {
        "input": text, "model": "sim-text", "client_request_id": str(uuid.uuid4()), "attachments": list(files)})
    assert response.status_code == 302, response.content.decode()[:2000]
    return ResponseRequest.objects.get(owner=owner)


def file_url(request: ResponseRequest, attachment: Attachment) -> str:
    return reverse("responses_app:chat-attachment", args=[request.conversation_id, request.pk, attachment.pk])


# --- the type, told by the bytes --------------------------------------------------------------------

def test_sniffing_reads_the_bytes_and_the_size_of_an_image() -> None:
    assert sniff(PNG) is not None and (sniff(PNG).name, sniff(PNG).width, sniff(PNG).height) == ("png", 3, 2)
    gif = b"GIF89a" + struct.pack("<HH", 640, 480) + b"\x00" * 8
    assert (sniff(gif).name, sniff(gif).width, sniff(gif).height) == ("gif", 640, 480)
    jpeg = b"\xff\xd8\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + b"\x00" * 9 + \
        b"\xff\xc0" + struct.pack(">HBHH", 17, 8, 480, 640) + b"\x03"
    assert (sniff(jpeg).name, sniff(jpeg).width, sniff(jpeg).height) == ("jpeg", 640, 480)
    webp = b"RIFF" + b"\x00" * 4 + b"WEBPVP8X" + b"\x00" * 8 + (639).to_bytes(3, "little") + (479).to_bytes(3, "little")
    assert (sniff(webp).name, sniff(webp).width, sniff(webp).height) == ("webp", 640, 480)
    assert sniff(PDF).mime == "application/pdf" and not sniff(PDF).image
    assert sniff("Grüße\n".encode()).mime == "text/plain"
    assert sniff(b'<svg xmlns="http://www.w3.org/2000/svg"><script>x()</script></svg>').mime == "text/plain"
    assert sniff(EXE) is None and sniff(b"\x89PNG\r\n\x1a\n") is None and sniff(b"\xff\xfe\x00") is None


def test_a_file_is_what_its_bytes_say_not_its_name_or_content_type(owner: Any) -> None:
    with pytest.raises(attachments.Refused, match="“photo.png” is not a kind of file this chat takes"):
        attachments.check([upload("photo.png", EXE, "image/png")])
    (taken,) = attachments.check([upload("notes.png", b"plain words", "image/png")])
    assert taken.sniffed.mime == "text/plain", "served and sent as what it is"


# --- the limits -----------------------------------------------------------------------------------------

class Unreadable:
    """A file that says it is large: refused by its size, before a byte is read."""

    name, size = "huge.pdf", 9 * 1024 * 1024

    def read(self, size: int = -1) -> bytes:
        raise AssertionError("read")


class Unsized:
    name, size = "unsized.txt", None

    def read(self, size: int = -1) -> bytes:
        assert size == 101
        return b"a" * size


def test_limits_refuse_with_words_that_say_what_to_do(settings: Any) -> None:
    with pytest.raises(attachments.Refused, match=r"“huge.pdf” is 9 MB; an attachment can be at most 8 MB\. "
                                                  r"Choose a smaller file\."):
        attachments.check([Unreadable()])
    settings.RELAY_ATTACHMENT_MAX_BYTES = 100
    with pytest.raises(attachments.Refused, match="“x.txt” is 101 bytes; an attachment can be at most 100 bytes"):
        attachments.check([SimpleUploadedFile("x.txt", b"a" * 101)])
    with pytest.raises(attachments.Refused, match="“unsized.txt” is larger than 100 bytes"):
        attachments.check([Unsized()])  # a file of no stated size is read up to the cap, no further
    settings.RELAY_ATTACHMENT_MAX_FILES = 2
    with pytest.raises(attachments.Refused, match="You attached 3 files; a message takes at most 2. Remove 1"):
        attachments.check([upload(f"{n}.txt", b"hi") for n in range(3)])
    with pytest.raises(attachments.Refused, match="is empty"):
        attachments.check([upload("empty.txt", b"")])
    settings.RELAY_ATTACHMENT_TYPES = "png,jpeg"
    with pytest.raises(attachments.Refused, match="attach PNG or JPEG images"):
        attachments.check([upload("doc.pdf", PDF)])
    settings.RELAY_ATTACHMENT_TYPES = ""
    with pytest.raises(attachments.Refused, match="This chat takes no attachments"):
        attachments.check([upload("a.png", PNG)])


def test_settings_are_checked(settings: Any) -> None:
    settings.RELAY_ATTACHMENT_TYPES = "png,exe"
    assert any("RELAY_ATTACHMENT_TYPES" in m.msg and "'exe'" in m.msg for m in relay_check_errors())
    settings.RELAY_ATTACHMENT_TYPES = "png"
    settings.RELAY_ATTACHMENT_STORAGE = "private"
    assert [m.id for m in relay_check_errors()] == ["responses_app.E030"]
    settings.STORAGES = {**settings.STORAGES, "private": {"BACKEND": "django.core.files.storage.InMemoryStorage"}}
    assert relay_check_errors() == []


def test_a_refused_send_keeps_the_text_and_says_to_attach_again(owner: Any) -> None:
    response = client_for(owner).post(reverse("responses_app:conversation-new"), {
        "input": "Look at my program", "model": "sim-text", "attachments": [upload("tool.exe", EXE)]})
    assert response.status_code == 400
    page = response.content.decode()
    assert "Look at my program</textarea>" in page
    assert "“tool.exe” is not a kind of file this chat takes: attach PNG, JPEG, GIF or WebP images, PDF or plain " \
           "text files." in page
    assert "attach them again" in page and 'aria-invalid="true"' in page
    assert not ResponseRequest.objects.exists() and not Attachment.objects.exists()


def test_the_json_api_takes_a_multipart_form_and_refuses_in_words(owner: Any) -> None:
    client = client_for(owner)
    url = reverse("responses_app:api-requests")
    refused = client.post(url, {"input": "hi", "model": "sim-text", "attachments": [upload("a.bin", EXE)]})
    assert refused.status_code == 400 and "attachments" in refused.json()["errors"]
    made = client.post(url, {"input": "", "model": "sim-text", "attachments": [upload("shot.png", PNG)]})
    assert made.status_code == 201, made.content
    request = ResponseRequest.objects.get(pk=made.json()["id"])
    (attachment,) = attachments.of_turn(request)
    assert (attachment.name, attachment.mime, attachment.width, attachment.height) == ("shot.png", "image/png", 3, 2)
    assert request.input == "", "an attachment alone is a message"


# --- stored with the turn, shown, served to who may see the turn ------------------------------------------

def test_the_no_js_form_stores_them_and_the_turn_shows_them(owner: Any) -> None:
    request = send(owner, upload("shot.png", PNG, "text/html"), upload("report.pdf", PDF))
    image, pdf = attachments.of_turn(request)
    assert request.params["attachments"] == [str(image.pk), str(pdf.pk)]
    assert attachments.read(image) == PNG and pdf.mime == "application/pdf" and pdf.size == len(PDF)
    page = client_for(owner).get(reverse("responses_app:chat", args=[request.conversation_id])).content.decode()
    assert f'<img src="{file_url(request, image)}" alt="shot.png" width="3" height="2"' in page
    assert f'href="{file_url(request, pdf)}" download="report.pdf"' in page
    assert "/media/" not in page


def test_an_image_is_served_inline_and_a_file_as_a_download_with_nothing_to_run(owner: Any) -> None:
    request = send(owner, upload("shot.png", PNG), upload("report.pdf", PDF))
    image, pdf = attachments.of_turn(request)
    client = client_for(owner)
    shown = client.get(file_url(request, image))
    assert shown.status_code == 200 and b"".join(shown.streaming_content) == PNG
    assert shown["Content-Type"] == "image/png" and shown["X-Content-Type-Options"] == "nosniff"
    assert shown["Content-Disposition"].startswith("inline")
    fetched = client.get(file_url(request, pdf))
    assert fetched["Content-Type"] == "application/pdf"
    assert fetched["Content-Disposition"] == 'attachment; filename="report.pdf"'
    policy = fetched["Content-Security-Policy"]
    assert "sandbox" in policy and "default-src 'none'" in policy
    assert fetched["X-Content-Type-Options"] == "nosniff" and "private" in fetched["Cache-Control"]


def test_only_who_may_see_the_turn_gets_an_attachment(owner: Any, outsider: Any, staff: Any) -> None:
    request = send(owner, upload("secret.png", PNG))
    (image,) = attachments.of_turn(request)
    url = file_url(request, image)
    assert client_for(owner).get(url).status_code == 200
    assert client_for(staff).get(url).status_code == 200, "staff who may view requests (the admin)"
    assert client_for(outsider).get(url).status_code == 404
    assert Client().get(url).status_code == 404, "logged out: 404, not a login page that says it exists"
    other = send_second(owner)
    wrong = reverse("responses_app:chat-attachment", args=[other.conversation_id, other.pk, image.pk])
    assert client_for(owner).get(wrong).status_code == 404, "only through the turn that lists it"
    services.conversation_delete(conversation=request.conversation)
    assert client_for(owner).get(url).status_code == 404, "a deleted conversation's files are gone from its pages"
    assert client_for(staff).get(url).status_code == 200


def send_second(owner: Any) -> ResponseRequest:
    done = submission.submit(user=owner, data={"input": "another", "model": "sim-text"})
    return done.request


def test_a_share_links_viewers_get_the_shared_turns_attachments(owner: Any, outsider: Any) -> None:
    request = send(owner, upload("shot.png", PNG))
    (image,) = attachments.of_turn(request)
    share = shares.share_create(conversation=request.conversation, user=owner)
    url = reverse("responses_app:shared-attachment", args=[share.token, request.pk, image.pk])
    viewer = client_for(outsider)
    page = viewer.get(reverse("responses_app:shared", args=[share.token])).content.decode()
    assert f'<img src="{url}"' in page
    assert viewer.get(url).status_code == 200
    assert Client().get(url).status_code == 404, "a link that needs an account"
    assert viewer.get(file_url(request, image)).status_code == 404, "not through the owner's address"
    other = send_second(owner)
    elsewhere = shares.share_create(conversation=other.conversation, user=owner)
    assert viewer.get(reverse("responses_app:shared-attachment", args=[elsewhere.token, request.pk, image.pk])
                      ).status_code == 404, "another conversation's link"
    shares.share_revoke(share=share)
    assert viewer.get(url).status_code == 404


# --- what the provider is sent --------------------------------------------------------------------------

def test_the_input_sent_upstream_holds_the_parts(owner: Any) -> None:
    request = send(owner, upload("shot.png", PNG), upload("report.pdf", PDF))
    assert request.input == "What is this?", "the stored input stays the text typed"
    body = build_body(selectors.request_get(request_id=request.pk))
    assert body["input"] == [{"role": "user", "content": [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": "data:image/png;base64," + base64.b64encode(PNG).decode()},
        {"type": "input_file", "filename": "report.pdf",
         "file_data": "data:application/pdf;base64," + base64.b64encode(PDF).decode()},
    ]}]


def test_regenerate_and_the_context_of_later_turns_keep_them(owner: Any) -> None:
    request = send(owner, upload("shot.png", PNG))
    ResponseRequest.objects.filter(pk=request.pk).update(status="completed", final_text="A small picture.")
    (image,) = attachments.of_turn(request)
    client = client_for(owner)
    regenerate = reverse("responses_app:chat-regenerate", args=[request.conversation_id, request.pk])
    assert client.post(regenerate, {"client_request_id": str(uuid.uuid4())}).status_code == 302
    version = ResponseRequest.objects.exclude(pk=request.pk).get()
    assert version.params["attachments"] == [str(image.pk)]
    assert client.get(file_url(version, image)).status_code == 200
    edit = reverse("responses_app:chat-edit", args=[request.conversation_id, request.pk])
    assert client.post(edit, {"prompt": "And now?", "client_request_id": str(uuid.uuid4())}).status_code == 302
    edited = ResponseRequest.objects.get(input="And now?")
    assert edited.params["attachments"] == [str(image.pk)], "an edit keeps the turn's attachments"
    later = submission.submit(user=owner, data={"input": "Thanks", "model": "sim-text",
                                                "conversation": str(request.conversation_id)}).request
    context = selectors.conversation_context(request=later)
    assert context[0]["content"][1]["type"] == "input_image", "the full context carries the earlier turn's image"
    assert Attachment.objects.count() == 1, "versions share the stored file"


def test_staff_find_them_in_the_admin(owner: Any, staff: Any) -> None:
    from django.contrib.auth.models import Permission

    request = send(owner, upload("shot.png", PNG))
    (image,) = attachments.of_turn(request)
    staff.user_permissions.add(Permission.objects.get(codename="view_attachment"))
    client = client_for(type(staff).objects.get(pk=staff.pk))
    page = client.get(reverse("admin:responses_app_responserequest_change", args=[request.pk])).content.decode()
    assert f'<a href="{file_url(request, image)}">shot.png</a>' in page
    assert client.get(file_url(request, image)).status_code == 200
