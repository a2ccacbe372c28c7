#!/usr/bin/env python3
"""The person on the other end of an MQTT chat, for atc's IM-channel scenarios.

Run with the provisioned venv's python (QwenPaw depends on paho-mqtt).

  listen PORT TOPIC FILE   subscribe to TOPIC on 127.0.0.1:PORT (QoS 2) and append every
                           message as one JSON line {"topic": ..., "text": ...} to FILE;
                           prints READY once subscribed; runs until killed
  say PORT TOPIC TEXT      publish TEXT to TOPIC (QoS 2) and exit once it is delivered
"""

import json
import sys
import threading

import paho.mqtt.client as mqtt


def client(name):
    return mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=name)


def listen(port, topic, path):
    ready = threading.Event()
    c = client("atc-e2e-listener-" + topic.replace("/", "-"))

    def on_connect(cl, _userdata, _flags, _reason, _props):
        cl.subscribe(topic, qos=2)

    def on_subscribe(_cl, _userdata, _mid, _reasons, _props):
        ready.set()

    def on_message(_cl, _userdata, msg):
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"topic": msg.topic, "text": msg.payload.decode("utf-8", "replace")}) + "\n")

    c.on_connect = on_connect
    c.on_subscribe = on_subscribe
    c.on_message = on_message
    c.connect("127.0.0.1", port)
    c.loop_start()
    if not ready.wait(20):
        sys.exit("mqtt_person: not subscribed within 20 s")
    print("READY", flush=True)
    threading.Event().wait()


def say(port, topic, text):
    c = client("atc-e2e-person-speaker")
    c.connect("127.0.0.1", port)
    c.loop_start()
    info = c.publish(topic, text, qos=2)
    info.wait_for_publish(20)
    c.loop_stop()
    c.disconnect()


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "listen":
        listen(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    elif len(sys.argv) == 5 and sys.argv[1] == "say":
        say(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
