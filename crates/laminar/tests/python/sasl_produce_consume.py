"""kafka-python over SASL_PLAINTEXT: produce N records to a topic, then read them all back.

kafka-python 2.0.2 begins with SaslHandshake v0 and then sends the bare SASL tokens framed
by their length (no SaslAuthenticate), for PLAIN and SCRAM alike.

usage: sasl_produce_consume.py ADDR MECHANISM USER PASSWORD TOPIC N
prints: the values read back, one per line
"""
import sys

from kafka import KafkaConsumer, KafkaProducer

addr, mechanism, user, password, topic, n = sys.argv[1:7]
settings = dict(
    bootstrap_servers=addr,
    security_protocol="SASL_PLAINTEXT",
    sasl_mechanism=mechanism,
    sasl_plain_username=user,
    sasl_plain_password=password,
    # No version probe: 2.0.2 guesses from ApiVersions ranges written for Kafka 2.x.
    api_version=(2, 5, 0),
)
producer = KafkaProducer(**settings)
for i in range(int(n)):
    producer.send(topic, f"{mechanism}-{i}".encode()).get(timeout=30)
producer.close()
consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=5000, **settings)
for record in consumer:
    print(record.value.decode())
consumer.close()
