import zmq, time, struct
ctx=zmq.Context()
subs=[]
for t in [b"eb", b"zz", b"e", b"e"*(8<<20)]:
    s=ctx.socket(zmq.SUB); s.setsockopt(zmq.LINGER,0); s.connect("tcp://127.0.0.1:19702"); s.setsockopt(zmq.SUBSCRIBE,t); subs.append(s)
time.sleep(0.5)
d=ctx.socket(zmq.DEALER); d.connect("tcp://127.0.0.1:19700")
t=time.time(); d.send_multipart([b"DRK1", bytes([2]), struct.pack(">Q",1)]); 
print("pong", d.poll(3000), time.time()-t)
